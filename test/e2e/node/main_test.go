// Package node_test runs sless on the real node: kaniko builds, Knative's
// data plane serving, and the workloads' pods. A package of its own, so
// its process never holds test/e2e's shared real-controller bed, whose
// controllers own the host's :8080 that the node's Tekton needs.
package node_test

import (
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testbed.Main(m)
}
