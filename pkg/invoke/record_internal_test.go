package invoke

import (
	"strings"
	"testing"
	"unsafe"
)

// A text cut to its cap is a copy: a record waits in the queue (up to
// 100,000 of them), and a slice of a long error would keep all of it alive.
func TestCleanTextCutIsACopy(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	cut := cleanText(long, MaxErrorLength)
	if len(cut) != MaxErrorLength {
		t.Fatalf("cut to %d bytes, want %d", len(cut), MaxErrorLength)
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(long)))
	at := uintptr(unsafe.Pointer(unsafe.StringData(cut)))
	if at >= start && at < start+uintptr(len(long)) {
		t.Fatal("the cut text shares the long text's memory")
	}
}
