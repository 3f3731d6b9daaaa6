package callback

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// MaxRedirects bounds the redirects a delivery follows.
const MaxRedirects = 3

// Lookup resolves a host name to its addresses.
type Lookup func(ctx context.Context, host string) ([]netip.Addr, error)

func systemLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// Client is an HTTP client that reaches only what p admits: each dial
// resolves the host, checks every address and connects to a checked
// address itself, so a name cannot resolve to another address between
// the check and the connection (DNS rebinding). Redirects are followed
// only as POSTs, at most MaxRedirects, each checked the same way. It uses
// no proxy from the environment, which would dial in its stead. lookup
// nil takes the system resolver.
func (p *Policy) Client(timeout time.Duration, lookup Lookup) *http.Client {
	if lookup == nil {
		lookup = systemLookup
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			addrs, err := p.resolve(ctx, host, lookup)
			if err != nil {
				return nil, err
			}
			var errs []error
			for _, a := range addrs {
				c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
				if err == nil {
					return c, nil
				}
				errs = append(errs, err)
			}
			return nil, errors.Join(errs...)
		},
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		switch {
		case len(via) > MaxRedirects:
			return fmt.Errorf("more than %d redirects", MaxRedirects)
		case req.Method != http.MethodPost:
			return fmt.Errorf("a redirect to %s would drop the body (%d turns the POST into a %s)", req.URL.Redacted(), req.Response.StatusCode, req.Method)
		}
		return p.CheckURL(req.URL.String())
	}}
}

// resolve returns the addresses of host the policy admits, refusing the
// host when any of them is not: a name that resolves to a private address
// among public ones is not a public name.
func (p *Policy) resolve(ctx context.Context, host string, lookup Lookup) ([]netip.Addr, error) {
	if err := p.checkHost(host); err != nil {
		return nil, err
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	addrs, err := lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	if p.admitsName(host) {
		return addrs, nil
	}
	for _, a := range addrs {
		if err := p.CheckAddr(host, a); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}
