package names

import (
	"fmt"
	"math"
)

// maxRevisionName is the longest revision name: a DNS-1035 label, which
// Knative requires of it (it names the revision's Deployment and labels
// its pods with it).
const maxRevisionName = 63

// warmSuffix is what WarmRevision appends.
const warmSuffix = "-warm"

// revisionRoom is how many characters may follow "<name>-" in a revision
// name so that the name, WarmRevision's suffix included, is a label:
// Knative requires a named revision to start with its Service's name and a
// dash, so only this part can give way. For names of at most
// slessv1alpha1.MaxNameLength characters it is at least 5.
func revisionRoom(name string) int {
	return maxRevisionName - len(warmSuffix) - len(name) - 1
}

// generationSuffix names generation gen in at most room characters. It is
// Knative's own form, the generation in five or more decimal digits, while
// that fits. Past that (for a 52-character name, from generation 100000 on)
// it is room characters: a letter, base-36 digits and a decimal digit. So it
// is never all digits, as the decimal form is, nor all letters, as
// RetemplatedRevision's part is: no two forms give the same name. The
// letter form counts 26·36^(room-2)·10 generations past the decimal ones
// (12 million for room 5, more than int64 holds from room 13) and then
// starts again. A name repeated that many edits later is long gone from
// Knative's revision history; one still there is a taken name, which the
// Knative adapter replaces with RetemplatedRevision's as for any other.
func generationSuffix(gen int64, room int) string {
	dec := fmt.Sprintf("%05d", gen)
	if len(dec) <= room || room < 2 {
		return dec
	}
	// Here gen ≥ 10^room, and room ≤ 18 since no int64 has 20 digits.
	first := uint64(1)
	for range room {
		first *= 10
	}
	n := uint64(gen) - first
	span := uint64(26 * 10)
	for range room - 2 {
		if span > math.MaxUint64/36 {
			span = 0 // more than any generation needs: no wrap
			break
		}
		span *= 36
	}
	if span != 0 {
		n %= span
	}
	const base36 = "0123456789abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, room)
	b[room-1] = '0' + byte(n%10)
	n /= 10
	for i := room - 2; i >= 1; i-- {
		b[i] = base36[n%36]
		n /= 36
	}
	b[0] = 'a' + byte(n%26)
	return string(b)
}
