// Package recordcodec is the compact binary form of an invocation record,
// for the stores sless keeps on local disk: local mode's history and the
// spool that holds records while PostgreSQL is down. Numbers are varints and
// text is length-prefixed, so a typical record takes 60 to 90 bytes where its
// JSON took over 300.
package recordcodec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
)

// Layouts: the first byte of an encoding. Bytes from '{' on are not used,
// so a store may tell the older JSON values apart.
const (
	// Keyed leaves out namespace, function and start time: the local store
	// keeps them in its bucket name and key.
	Keyed byte = 1
	// Full holds every field but the store-assigned ID.
	Full byte = 2
)

const flagColdStart = 1

// ErrCorrupt is returned by Decode for bytes no Append made.
var ErrCorrupt = errors.New("invocation record: not a valid encoding")

// Append appends r in the given layout to dst.
func Append(dst []byte, layout byte, r *invoke.Record) []byte {
	var flags byte
	if r.ColdStart {
		flags |= flagColdStart
	}
	dst = append(dst, layout, flags)
	if layout == Full {
		dst = appendString(dst, r.Namespace)
		dst = appendString(dst, r.Function)
		dst = binary.AppendVarint(dst, r.StartedAt.UnixMicro())
	}
	dst = appendString(dst, r.Revision)
	dst = appendString(dst, r.Trigger)
	dst = appendString(dst, r.RequestID)
	dst = appendString(dst, r.Error)
	dst = binary.AppendUvarint(dst, uint64(max(r.Duration.Microseconds(), 0)))
	dst = binary.AppendUvarint(dst, uint64(max(r.Status, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(r.BytesIn, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(r.BytesOut, 0)))
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// Decode reads an encoding made by Append into r. For the Keyed layout the
// caller fills namespace, function, start time and ID from the key.
func Decode(b []byte, r *invoke.Record) error {
	d := decoder{b: b}
	if len(b) < 2 {
		return ErrCorrupt
	}
	layout, flags := b[0], b[1]
	d.b = b[2:]
	switch layout {
	case Full:
		r.Namespace = d.string()
		r.Function = d.string()
		r.StartedAt = time.UnixMicro(d.varint()).UTC()
	case Keyed:
	default:
		return fmt.Errorf("%w: layout %d", ErrCorrupt, layout)
	}
	r.ColdStart = flags&flagColdStart != 0
	r.Revision = d.string()
	r.Trigger = d.string()
	r.RequestID = d.string()
	r.Error = d.string()
	r.Duration = time.Duration(d.uvarint()) * time.Microsecond
	r.Status = int(d.uvarint())
	r.BytesIn = int64(d.uvarint())
	r.BytesOut = int64(d.uvarint())
	if d.bad || len(d.b) != 0 {
		return ErrCorrupt
	}
	return nil
}

type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
