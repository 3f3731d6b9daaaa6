package kube_test

import (
	"context"
	"sync"
	"testing"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// Replicas asking for a namespace's key at once get one key, kept in the
// namespace's Secret, and the same key later.
func TestCallbackKeysAgreeAcrossReplicas(t *testing.T) {
	k := testbed.SharedKube(t)
	ns := k.Namespace(t)
	keys := make([]string, 4)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if keys[i], err = (&kube.CallbackKeys{Client: k.Client}).SigningKey(context.Background(), ns); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, key := range keys {
		if key == "" || key != keys[0] {
			t.Fatalf("replicas got keys %q", keys)
		}
	}
	again, err := (&kube.CallbackKeys{Client: k.Client}).SigningKey(context.Background(), ns)
	if err != nil || again != keys[0] {
		t.Errorf("later: %q %v, want %q", again, err, keys[0])
	}
	other, err := (&kube.CallbackKeys{Client: k.Client}).SigningKey(context.Background(), k.Namespace(t))
	if err != nil || other == keys[0] {
		t.Errorf("another namespace's key: %q %v", other, err)
	}
}
