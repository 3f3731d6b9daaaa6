package resources

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTermination(t *testing.T) {
	const wrapperTimeout = `{"error": {"type": "Timeout", "message": "function exceeded its timeout of 30s"}, "requestId": "r"}`
	cases := []struct {
		name        string
		exit        int32
		termination string
		timedOut    bool
		message     string
	}{
		{"wrapper's timeout", 1, wrapperTimeout, true, "the function failed with exit code 1: Timeout: function exceeded its timeout of 30s"},
		{"handler's own Timeout", 1, `{"error": {"type": "Timeout", "message": "upstream slow"}}`, false, "the function failed with exit code 1: Timeout: upstream slow"},
		{"handler error", 1, `{"error": {"type": "ValueError", "message": "no rows"}}`, false, "the function failed with exit code 1: ValueError: no rows"},
		{"timeout body, exit 0", 0, wrapperTimeout, false, "the function failed with exit code 0: Timeout: function exceeded its timeout of 30s"},
		{"not the wrapper's JSON", 2, `  panic: boom` + "\n", false, "the function failed with exit code 2: panic: boom"},
		{"an answer, not an error", 1, `{"rows": 3}`, false, `the function failed with exit code 1: {"rows": 3}`},
		{"nothing written", 137, " \n", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := WrapperTimedOut(tc.exit, tc.termination); got != tc.timedOut {
				t.Errorf("WrapperTimedOut = %v, want %v", got, tc.timedOut)
			}
			if got := FailureMessage(tc.exit, tc.termination); got != tc.message {
				t.Errorf("FailureMessage = %q, want %q", got, tc.message)
			}
		})
	}
}

func TestTruncateKeepsUTF8Whole(t *testing.T) {
	short := "fine"
	if Truncate(short) != short {
		t.Fatal("a short message was cut")
	}
	long := strings.Repeat("a", MaxMessageLength-1) + "é and more"
	got := Truncate(long)
	if len(got) > MaxMessageLength || !utf8.ValidString(got) || got != strings.Repeat("a", MaxMessageLength-1) {
		t.Fatalf("cut to %d bytes, valid %v, tail %q", len(got), utf8.ValidString(got), got[len(got)-3:])
	}
}
