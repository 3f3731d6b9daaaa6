// Package callback posts the results of asynchronous calls to the URLs
// their callers named: signed with a key per namespace, and only to hosts
// the operator's policy admits, so that a caller cannot make sless reach
// loopback, private or cluster-internal addresses on its behalf (SSRF).
package callback

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// RefusedError is a callback URL or address the policy does not admit.
type RefusedError struct {
	Host   string
	Reason string
}

func (e *RefusedError) Error() string {
	return "callback host " + e.Host + " is refused: " + e.Reason
}

// IsRefused says whether err is (or wraps) a RefusedError.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// Policy says which hosts callbacks may reach. The zero Policy admits
// public addresses only.
type Policy struct {
	nets  []netip.Prefix
	hosts map[string]bool
}

// ParseAllowList reads an operator's allow-list: each entry a CIDR
// (10.0.0.0/8), an address (127.0.0.1, ::1) or a host name
// (hooks.internal), which admits that name whatever it resolves to.
func ParseAllowList(entries []string) (*Policy, error) {
	p := &Policy{hosts: map[string]bool{}}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if strings.Contains(e, "/") && !strings.Contains(e, "://") {
			pfx, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("callback allow-list entry %q: not a CIDR: %w", e, err)
			}
			p.nets = append(p.nets, pfx.Masked())
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			p.nets = append(p.nets, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		name := normalHost(e)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, fmt.Errorf("callback allow-list entry %q: want a CIDR, an IP address or a host name: %s", e, errs[0])
		}
		p.hosts[name] = true
	}
	return p, nil
}

// Allowed lists the policy's entries, for logs.
func (p *Policy) Allowed() []string {
	var out []string
	for _, n := range p.nets {
		out = append(out, n.String())
	}
	for h := range p.hosts {
		out = append(out, h)
	}
	return out
}

func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// numericRE matches hosts whose labels are all numbers (decimal, octal or
// hex), which no DNS name is.
var numericRE = regexp.MustCompile(`^((0x[0-9a-f]*|[0-9]+)\.)*(0x[0-9a-f]*|[0-9]+)$`)

// internalSuffixes name hosts inside the cluster or the machine, refused
// by name before any lookup.
var internalSuffixes = []string{".svc", ".cluster.local", ".localhost"}

// CheckURL checks what can be known of raw without a lookup: its form
// (v1alpha1.CheckCallbackURL), an address given literally, and names of
// the machine or the cluster (localhost, *.svc, *.cluster.local, names of
// one label). The addresses a name resolves to are checked at each
// delivery.
func (p *Policy) CheckURL(raw string) error {
	if msg := slessv1alpha1.CheckCallbackURL(raw); msg != "" {
		return fmt.Errorf("callback URL %s", msg)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	return p.checkHost(u.Hostname())
}

// checkHost checks a host as it appears in a URL.
func (p *Policy) checkHost(host string) error {
	if a, err := netip.ParseAddr(host); err == nil {
		return p.CheckAddr(host, a)
	}
	name := normalHost(host)
	if p.hosts[name] {
		return nil
	}
	switch {
	case name == "localhost":
		return &RefusedError{Host: host, Reason: "it names this machine"}
	case !strings.Contains(name, "."):
		return &RefusedError{Host: host, Reason: "a name of one label is resolved through search domains, inside the cluster"}
	case numericRE.MatchString(name):
		// 127.1, 0x7f.1, 2130706433.0: resolvers read some of these as addresses.
		return &RefusedError{Host: host, Reason: "it looks like an address in a short, octal or hex form; write it as a dotted quad"}
	}
	for _, s := range internalSuffixes {
		if strings.HasSuffix(name, s) {
			return &RefusedError{Host: host, Reason: "names under " + s + " are internal"}
		}
	}
	return nil
}

// admitsName says whether host is admitted by name, whatever it resolves to.
func (p *Policy) admitsName(host string) bool { return p.hosts[normalHost(host)] }

// special are the ranges no callback reaches unless allowed, with why.
var special = []struct {
	pfx    netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified (this-network) address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a NAT64 address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
	{netip.MustParsePrefix("100::/64"), "a discard address"},
}

// CheckAddr checks one address host stands for.
func (p *Policy) CheckAddr(host string, a netip.Addr) error {
	a = a.Unmap().WithZone("")
	for _, n := range p.nets {
		if n.Contains(a) {
			return nil
		}
	}
	reason := ""
	switch {
	case a.IsUnspecified():
		reason = "an unspecified address"
	case a.IsLoopback():
		reason = "a loopback address"
	case a.IsLinkLocalUnicast():
		reason = "a link-local address"
	case a.IsMulticast():
		reason = "a multicast address"
	case a.IsPrivate():
		reason = "a private address"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		reason = "the broadcast address"
	default:
		for _, s := range special {
			if s.pfx.Contains(a) {
				reason = s.reason
				break
			}
		}
	}
	if reason == "" {
		return nil
	}
	if host != a.String() {
		reason = a.String() + " is " + reason
	} else {
		reason = "it is " + reason
	}
	return &RefusedError{Host: host, Reason: reason + " (an operator may allow it: sless dev --callback-allow)"}
}
