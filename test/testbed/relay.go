package testbed

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Relay is a TCP relay to a broker (or any server) that can drop every
// connection and refuse new ones, as a broker restart or a network
// partition does, for tests of what a client does meanwhile.
type Relay struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	down  bool
	conns []net.Conn
	// refused counts connections turned away while down, accepted those relayed.
	refused, accepted int
}

// NewRelay relays to the host of serverURL and returns the relay and
// serverURL with the relay's address as its host. It stops when the test ends.
func NewRelay(t testing.TB, serverURL string) (*Relay, string) {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{ln: ln, to: u.Host}
	t.Cleanup(func() { ln.Close(); r.Cut(false) })
	go r.serve()
	u.Host = ln.Addr().String()
	return r, u.String()
}

func (r *Relay) serve() {
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		down := r.down
		if down {
			r.refused++
		}
		r.mu.Unlock()
		if down {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", r.to)
		if err != nil {
			in.Close()
			continue
		}
		r.mu.Lock()
		r.accepted++
		r.conns = append(r.conns, in, out)
		r.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); out.Close() }()
		go func() { _, _ = io.Copy(in, out); in.Close() }()
	}
}

// Cut drops every connection; down says whether new ones are refused.
func (r *Relay) Cut(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// Up relays new connections again.
func (r *Relay) Up() {
	r.mu.Lock()
	r.down = false
	r.mu.Unlock()
}

// Refusals counts the connections turned away while down.
func (r *Relay) Refusals() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

// Accepts counts the connections relayed.
func (r *Relay) Accepts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepted
}

// Addr is the relay's host:port.
func (r *Relay) Addr() string { return r.ln.Addr().String() }
