package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseTenantPrefixes(t *testing.T) {
	for _, tc := range []struct {
		derived, flag string
		want          []string
		err           string
	}{
		{"tenant-", "", []string{"tenant-"}, ""},
		{"tenant", "team-, t-", []string{"tenant-", "team-", "t-"}, ""},
		{"tenant-", " , ", nil, "names no prefix"},
		{"tenant-", "Team_", nil, "does not start a namespace name"},
		{"tenant-", "kube-", nil, "default or kube-*"},
		{"tenant-", "kube-tenants-", nil, "default or kube-*"},
		{"tenant-", "k", nil, "default or kube-*"},
		{"tenant-", "def", nil, "default or kube-*"},
		{"kube", "", nil, "default or kube-*"},
	} {
		got, err := parseTenantPrefixes(tc.derived, tc.flag)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseTenantPrefixes(%q, %q) = %q, %v; want an error saying %q", tc.derived, tc.flag, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseTenantPrefixes(%q, %q) = %q, %v; want %q", tc.derived, tc.flag, got, err, tc.want)
		}
	}
}
