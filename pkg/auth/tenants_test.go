package auth

import (
	"slices"
	"strings"
	"testing"
)

func TestTenantPrefixes(t *testing.T) {
	for _, tc := range []struct {
		derived string
		more    []string
		want    []string
		err     string
	}{
		{"tenant-", nil, []string{"tenant-"}, ""},
		{"tenant", []string{"team-", "t-"}, []string{"tenant-", "team-", "t-"}, ""},
		{"tenant-", []string{"Team_"}, nil, "does not start a namespace name"},
		{"tenant-", []string{"kube-"}, nil, "default or kube-*"},
		{"tenant-", []string{"kube-tenants-"}, nil, "default or kube-*"},
		{"tenant-", []string{"k"}, nil, "default or kube-*"},
		{"tenant-", []string{"def"}, nil, "default or kube-*"},
		{"kube", nil, nil, "default or kube-*"},
	} {
		got, err := TenantPrefixes(tc.derived, tc.more)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("TenantPrefixes(%q, %q) = %q, %v; want an error saying %q", tc.derived, tc.more, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("TenantPrefixes(%q, %q) = %q, %v; want %q", tc.derived, tc.more, got, err, tc.want)
		}
	}
}
