package names

import (
	"strings"
	"testing"

	"github.com/sless-dev/sless/pkg/names/blobkey"
)

// The controller stores build contexts where the API stores an upload's,
// and its finalizer deletes a prefix that holds every object the API and
// the controller write for the function, and nothing of a function whose
// name extends it.
func TestKeysAreTheAPIs(t *testing.T) {
	const hex = "0aa6caed6283973cc8c62256d618796f17175f7c04b5f44d143b9a0db713458e"
	tests := []struct{ ns, fn, digest string }{
		{"default", "hello", "sha256:" + hex},
		{"team-a", "hello", hex},
		{"t-1", "a", "sha256:" + hex},
	}
	for _, tc := range tests {
		key := ContextKey(tc.ns, tc.fn, tc.digest)
		if want := blobkey.Context(tc.ns, tc.fn, tc.digest); key != want {
			t.Errorf("ContextKey(%s, %s, %s) = %s, the API's is %s", tc.ns, tc.fn, tc.digest, key, want)
		}
		if ns, fn, kind, ok := blobkey.Parse(key); !ok || ns != tc.ns || fn != tc.fn || kind != blobkey.KindContext {
			t.Errorf("%s parses as %s/%s %s %v", key, ns, fn, kind, ok)
		}
		prefix := ObjectPrefix(tc.ns, tc.fn)
		for _, k := range []string{key, blobkey.Source(tc.ns, tc.fn, hex)} {
			if !strings.HasPrefix(k, prefix) {
				t.Errorf("%s is not under the finalizer's prefix %s", k, prefix)
			}
		}
		if other := blobkey.Source(tc.ns, tc.fn+"-2", hex); strings.HasPrefix(other, prefix) {
			t.Errorf("%s of another function is under %s", other, prefix)
		}
	}
}
