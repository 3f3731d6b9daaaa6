// Package node_test runs sless on the real node: kaniko builds, Knative's
// data plane serving, and the workloads' pods. A package of its own, so
// its process never holds test/e2e's shared real-controller bed, whose
// controllers own the host's :8080 that the node's Tekton needs.
package node_test

import (
	"sync"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testbed.Main(m)
}

type subtest struct {
	name string
	run  func(*testing.T)
}

// together runs subtests at once, each t.Run in a goroutine of its own
// (which t.Run allows). t.Parallel would hold them to -parallel, the
// number of cores: on 2 the node's long waits would queue.
func together(t *testing.T, subtests ...subtest) {
	var wg sync.WaitGroup
	for _, st := range subtests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(st.name, st.run)
		}()
	}
	wg.Wait()
}
