package names

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names/blobkey"
)

// A SlessService's objects lie apart from those of a Function of its name
// (or any name): the finalizer of one never deletes the other's, and the
// sweep of function objects never parses a service's key as a function's.
func TestServiceObjectsApartFromFunctions(t *testing.T) {
	const hex = "0aa6caed6283973cc8c62256d618796f17175f7c04b5f44d143b9a0db713458e"
	meta := metav1.ObjectMeta{Namespace: "team", Name: "hello"}
	fn := &slessv1alpha1.Function{ObjectMeta: meta}
	svc := &slessv1alpha1.SlessService{ObjectMeta: meta}

	if got, want := WorkloadContextKey(fn, "sha256:"+hex), ContextKey("team", "hello", hex); got != want {
		t.Errorf("a function's context key = %s, want %s", got, want)
	}
	if got, want := WorkloadPrefix(fn), ObjectPrefix("team", "hello"); got != want {
		t.Errorf("a function's prefix = %s, want %s", got, want)
	}
	key := WorkloadContextKey(svc, "sha256:"+hex)
	if !strings.HasPrefix(key, WorkloadPrefix(svc)) {
		t.Errorf("%s is not under the service's prefix %s", key, WorkloadPrefix(svc))
	}
	if _, _, _, ok := blobkey.Parse(key); ok {
		t.Errorf("the sweep of function objects would take %s for a function's", key)
	}
	// Namespaces and function names are DNS labels: none has a prefix
	// that holds a service's key.
	for _, ns := range []string{"team", "services", "hello"} {
		for _, name := range []string{"hello", "team", "services"} {
			if p := ObjectPrefix(ns, name); strings.HasPrefix(key, p) || strings.HasPrefix(WorkloadPrefix(svc), p) {
				t.Errorf("function %s/%s's prefix %s holds the service's %s", ns, name, p, key)
			}
		}
	}
}
