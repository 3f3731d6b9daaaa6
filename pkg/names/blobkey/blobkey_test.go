package blobkey_test

import (
	"strings"
	"testing"

	"github.com/sless-dev/sless/pkg/names/blobkey"
)

func TestParse(t *testing.T) {
	h := strings.Repeat("ab", 32)
	tests := []struct {
		key      string
		ns, fn   string
		kind     blobkey.Kind
		accepted bool
	}{
		{blobkey.Source("team", "hello", h), "team", "hello", blobkey.KindSource, true},
		{blobkey.Context("team", "hello", "sha256:"+h), "team", "hello", blobkey.KindContext, true},
		{blobkey.Context("team", "hello", h), "team", "hello", blobkey.KindContext, true},
		{"team/hello/source/" + h + ".tar.gz", "", "", "", false},
		{"team/hello/context/" + h + ".zip", "", "", "", false},
		{"team/hello/source/" + strings.ToUpper(h) + ".zip", "", "", "", false},
		{"team/hello/source/" + h[:63] + ".zip", "", "", "", false},
		{"team/hello/other/" + h + ".zip", "", "", "", false},
		{"team/hello/source/x/" + h + ".zip", "", "", "", false},
		{"hello/source/" + h + ".zip", "", "", "", false},
		{"/hello/source/" + h + ".zip", "", "", "", false},
		{"backups/2026.tar.gz", "", "", "", false},
		{"", "", "", "", false},
	}
	for _, tc := range tests {
		ns, fn, kind, ok := blobkey.Parse(tc.key)
		if ok != tc.accepted || ns != tc.ns || fn != tc.fn || kind != tc.kind {
			t.Errorf("Parse(%q) = %q, %q, %q, %v; want %q, %q, %q, %v", tc.key, ns, fn, kind, ok, tc.ns, tc.fn, tc.kind, tc.accepted)
		}
	}
}
