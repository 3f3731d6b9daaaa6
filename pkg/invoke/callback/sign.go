package callback

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries a delivery's signature:
//
//	Sless-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(key, "<t>.<body>")>
//
// the scheme of Stripe's webhooks. The key is the namespace's signing key
// as `sless callbacks key` prints it, its characters used as the HMAC key.
const SignatureHeader = "Sless-Signature"

// KeyPrefix starts every signing key, so it is not mistaken for hex to decode.
const KeyPrefix = "slcb_"

// NewKey makes a signing key: KeyPrefix and 32 random bytes in hex.
func NewKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return KeyPrefix + hex.EncodeToString(b), nil
}

// Sign is the SignatureHeader value of body sent at t.
func Sign(key string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(key, ts, body))
}

func mac(key, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a SignatureHeader value against body as a receiver does:
// a v1 signature of key must match, and t be within tolerance of now (a
// replayed old delivery fails).
func Verify(key, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("no timestamp in the signature")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("the signature's timestamp is too far from now")
	}
	want := mac(key, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return errors.New("no v1 signature matches")
}
