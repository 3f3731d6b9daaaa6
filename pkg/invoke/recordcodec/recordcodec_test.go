package recordcodec

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sless-dev/sless/pkg/invoke"
)

func sample() invoke.Record {
	return invoke.Record{
		Namespace: "team-a", Function: "hello", Revision: "hello-00001", Trigger: invoke.TriggerHTTP,
		RequestID: "9f86d081884c7d659a2feaa0c55ad015", StartedAt: time.UnixMicro(1764936000123456).UTC(),
		Duration: 1234 * time.Microsecond, Status: 200, BytesIn: 17, BytesOut: 4096, ColdStart: true,
		Error: "upstream reset ünïcode",
	}
}

func TestRoundTrip(t *testing.T) {
	full := sample()
	keyed := sample()
	keyed.Namespace, keyed.Function, keyed.StartedAt = "", "", time.Time{}
	empty := invoke.Record{StartedAt: time.UnixMicro(0).UTC()}
	for _, tc := range []struct {
		name   string
		layout byte
		in     invoke.Record
	}{
		{"full", Full, full},
		{"keyed", Keyed, keyed},
		{"empty full", Full, empty},
		{"before 1970", Full, invoke.Record{StartedAt: time.UnixMicro(-5).UTC(), Status: 499}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Append(nil, tc.layout, &tc.in)
			var out invoke.Record
			if err := Decode(b, &out); err != nil {
				t.Fatal(err)
			}
			if tc.layout == Keyed {
				out.StartedAt = tc.in.StartedAt
			}
			if d := cmp.Diff(tc.in, out); d != "" {
				t.Fatalf("round trip (-in +out):\n%s", d)
			}
		})
	}
}

// The point of the package: a typical record in well under 100 bytes.
func TestSize(t *testing.T) {
	r := sample()
	r.Error = ""
	if n := len(Append(nil, Keyed, &r)); n > 80 {
		t.Fatalf("keyed encoding is %d bytes, want at most 80", n)
	}
	if n := len(Append(nil, Full, &r)); n > 100 {
		t.Fatalf("full encoding is %d bytes, want at most 100", n)
	}
}

func TestDecodeRefusesDamage(t *testing.T) {
	r := sample()
	good := Append(nil, Full, &r)
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"one byte", []byte{Full}},
		{"unknown layout", append([]byte{9}, good[1:]...)},
		{"json", []byte(`{"Namespace":"a"}`)},
		{"cut short", good[:len(good)-3]},
		{"trailing bytes", append(append([]byte{}, good...), 0)},
		{"string longer than the rest", []byte{Keyed, 0, 200, 'a'}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out invoke.Record
			if err := Decode(tc.b, &out); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode = %v, want ErrCorrupt", err)
			}
		})
	}
}
