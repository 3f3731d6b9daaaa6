package testbed

import (
	"testing"
	"time"
)

// Eventually polls cond for up to 30 s, for what has no channel or watch to
// wait on; cond's string says what it last saw, for the failure.
func Eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last: %s", what, detail)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
