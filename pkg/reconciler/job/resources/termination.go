// Package resources words how a FunctionJob run ended from what its
// runtime wrapper left in its termination message, alike for every runner.
package resources

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxMessageLength caps the failure message a run's status and record carry;
// the function's whole answer is in status.output.
const MaxMessageLength = 1024

// timeoutMessagePrefix starts the message of the wrappers' own timeout
// error. Checked with the error type, it tells the wrapper's timeout from a
// handler's own exception that happens to be called Timeout.
const timeoutMessagePrefix = "function exceeded its timeout of "

// WrapperError reads the error a job-mode wrapper wrote as its termination
// message ({"error": {"type", "message"}}); ok is false for anything else.
func WrapperError(termination string) (typ, message string, ok bool) {
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(termination), &body) != nil || body.Error.Type == "" {
		return "", "", false
	}
	return body.Error.Type, body.Error.Message, true
}

// WrapperTimedOut tells whether a run ended on the wrapper's own timeout:
// the wrappers stop the handler at timeoutSeconds and exit non-zero with a
// Timeout error, before any deadline of the platform's would. Over HTTP the
// same timeout is a 504, so such a run counts as past its deadline, not as
// failed — on a cluster and in local mode alike.
func WrapperTimedOut(exitCode int32, termination string) bool {
	typ, message, ok := WrapperError(termination)
	return ok && exitCode != 0 && typ == "Timeout" && strings.HasPrefix(message, timeoutMessagePrefix)
}

// FailureMessage says how a failed run's function ended: its own error when
// the wrapper wrote one, else what it left in the termination message; ""
// when it left nothing.
func FailureMessage(exitCode int32, termination string) string {
	termination = strings.TrimSpace(termination)
	if termination == "" {
		return ""
	}
	if typ, message, ok := WrapperError(termination); ok {
		return fmt.Sprintf("the function failed with exit code %d: %s: %s", exitCode, typ, message)
	}
	return fmt.Sprintf("the function failed with exit code %d: %s", exitCode, termination)
}

// Truncate cuts msg to MaxMessageLength bytes without splitting a UTF-8
// sequence, so the status stays valid JSON text.
func Truncate(msg string) string {
	if len(msg) <= MaxMessageLength {
		return msg
	}
	cut := MaxMessageLength
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}
