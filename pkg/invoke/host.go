package invoke

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// maxDomainLength leaves room under the 253 characters of a DNS name for
// the longest function name (52), the longest namespace (63) and their dots.
const maxDomainLength = 253 - 52 - 63 - 2

// CheckDomain says why s cannot be the domain functions are served under
// ({name}.{namespace}.{s}), or returns nil. The domain is a lowercase DNS
// name given bare: no scheme, port, wildcard or trailing dot.
func CheckDomain(s string) error {
	switch {
	case s == "":
		return errors.New("the function domain is empty")
	case strings.Contains(s, "://"):
		return fmt.Errorf("the function domain %q is a URL; give the bare domain, e.g. fn.example.com", s)
	case strings.HasPrefix(s, "*."):
		return fmt.Errorf("the function domain %q starts with a wildcard; give it without \"*.\" (functions are {name}.{namespace}.%s)", s, strings.TrimPrefix(s, "*."))
	case strings.Contains(s, ":"):
		return fmt.Errorf("the function domain %q has a port; give the domain alone (the port is the server's)", s)
	case len(s) > maxDomainLength:
		return fmt.Errorf("the function domain %q is %d characters long; at most %d leave room for {name}.{namespace} in a DNS name", s, len(s), maxDomainLength)
	}
	for _, l := range strings.Split(s, ".") {
		if !dnsLabel(l, 63, false) {
			return fmt.Errorf("the function domain %q has %q, which is not a DNS label (lowercase letters, digits and '-', 1-63 characters, no '-' at either end)", s, l)
		}
	}
	return nil
}

// FunctionHost is the host a function is served at under domain.
// Namespaces and function names are DNS labels without dots, so the two
// labels in front of the domain always name one function.
func FunctionHost(domain, namespace, name string) string {
	return name + "." + namespace + "." + domain
}

// Hosts returns a handler that serves the function hosts under
// Options.Domain, {name}.{namespace}.{domain}, with the whole path the
// function's own, and hands every other request (the REST API, /fn/, the
// domain itself) to next. Without a domain it is next.
func (p *Proxy) Hosts(next http.Handler) http.Handler {
	if p.opts.Domain == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		labels, under := p.underDomain(r.Host)
		if !under {
			next.ServeHTTP(w, r)
			return
		}
		p.serveHost(w, r, labels)
	})
}

// underDomain reports whether host (as in a Host header: any case, an
// optional port and trailing dot) lies strictly below the domain, and the
// labels in front of it, lowercased.
func (p *Proxy) underDomain(host string) (labels string, under bool) {
	if strings.HasPrefix(host, "[") {
		return "", false // an IPv6 literal
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	suffix := p.domainSuffix
	if len(host) <= len(suffix) || !strings.EqualFold(host[len(host)-len(suffix):], suffix) {
		return "", false
	}
	labels = host[:len(host)-len(suffix)]
	for i := 0; i < len(labels); i++ {
		if c := labels[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(labels), true // DNS names are case-insensitive
		}
	}
	return labels, true
}

// serveHost serves a request to a host below the domain: labels must be
// {name}.{namespace} or {tag}-{name}.{namespace}.
func (p *Proxy) serveHost(w http.ResponseWriter, r *http.Request, labels string) {
	start := time.Now()
	if refuseMethod(r.Method) {
		p.refuseMethod(w, r, start, false)
		return
	}
	name, ns, _ := strings.Cut(labels, ".")
	shape := "functions are served at {name}.{namespace}." + p.opts.Domain
	if !dnsName(labels) {
		p.refuse(w, r, start, Problem{Status: http.StatusBadRequest, Reason: ReasonInvalid,
			Detail: "the host " + r.Host + " is not a DNS name; " + shape})
		return
	}
	// The first label is a function's name, or {tag}-{name} of one of its
	// traffic targets, which may be longer.
	tagged := dnsLabel(name, 63, true) && strings.IndexByte(name, '-') > 0
	if strings.IndexByte(ns, '.') >= 0 || !(validFunctionName(name) || tagged) || !validNamespace(ns) {
		p.refuse(w, r, start, Problem{Status: http.StatusNotFound, Reason: ReasonNotFound,
			Detail: "no function is served at the host " + r.Host + "; " + shape})
		return
	}
	rest := r.URL.EscapedPath()
	if !strings.HasPrefix(rest, "/") {
		// OPTIONS * and other request targets that are no path.
		p.refuse(w, r, start, Problem{Status: http.StatusBadRequest, Reason: ReasonInvalid,
			Detail: "the request target " + r.RequestURI + " is not a path"})
		return
	}
	p.serve(w, r, &call{p: p, ns: ns, name: name, rest: rest, trigger: TriggerHTTP, start: start, reqID: RequestID(r), byHost: true})
}

// dnsName reports whether s is a sequence of DNS labels joined by dots.
func dnsName(s string) bool {
	for {
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return dnsLabel(s, 63, false)
		}
		if !dnsLabel(s[:i], 63, false) {
			return false
		}
		s = s[i+1:]
	}
}
