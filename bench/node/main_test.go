package node

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
