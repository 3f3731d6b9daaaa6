package testbed_test

import (
	"testing"

	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

func TestKubeStarts(t *testing.T) {
	k := testbed.SharedKube(t)
	ns := k.Namespace(t)
	if ns == "" {
		t.Fatal("no namespace")
	}
}
