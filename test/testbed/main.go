package testbed

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

var (
	shared   *Kube
	sharedMu sync.Mutex
	cleanups []func()
)

// Main runs a test package's tests with the parts it uses started lazily and
// stopped at the end, then runs after. Use it from TestMain:
//
//	func TestMain(m *testing.M) { testbed.Main(m) }
func Main(m *testing.M, after ...func()) {
	code := m.Run()
	sharedMu.Lock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	sharedMu.Unlock()
	for _, f := range after {
		f()
	}
	os.Exit(code)
}

func atExit(f func()) {
	cleanups = append(cleanups, f)
}

// SharedKube is the package's control plane, started on first use. A test
// that calls it in a package without testbed.Main leaks the processes until
// the test binary exits.
func SharedKube(t testing.TB) *Kube {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		k, err := StartKube(nil)
		if err != nil {
			t.Fatalf("testbed: %v", err)
		}
		shared = k
		atExit(func() {
			if err := k.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "testbed: stop control plane: %v\n", err)
			}
		})
	}
	return shared
}
