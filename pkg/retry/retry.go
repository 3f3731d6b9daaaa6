// Package retry holds what sless's HTTP callers (the Go client of the REST
// API, the cron runner) decide alike about a failed call: whether anything
// of it was sent, whether waiting could mend it, and a wait that ends with
// its context.
package retry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"syscall"
	"time"
)

// Refused says whether err is a connection the endpoint refused: nothing
// listens there (yet).
func Refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// NothingSent says whether err is a failure to connect, after which nothing
// of the request was sent: refused, the dial timed out, or a name lookup
// failed for a while. A name that does not exist is not one of them: it is
// a mistake no wait mends.
func NothingSent(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return !dns.IsNotFound && (dns.IsTemporary || dns.IsTimeout)
	}
	if Refused(err) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Pointless says whether a transport error stays the same however long one
// waits: the server's certificate does not verify, it is not speaking TLS
// at all, or its host name does not exist.
func Pointless(err error) bool {
	var certErr *tls.CertificateVerificationError
	var authority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	var dns *net.DNSError
	return errors.As(err, &certErr) || errors.As(err, &authority) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &record) || (errors.As(err, &dns) && dns.IsNotFound) ||
		// net/http words this one without wrapping the TLS error.
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// Sleep waits d, or until ctx ends (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
