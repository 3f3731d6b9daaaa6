// Package natstest runs a real NATS server with JetStream inside the test
// process (github.com/nats-io/nats-server/v2), on a free loopback port, so
// that tests need no server of the machine's.
package natstest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sless-dev/sless/pkg/queue/queuetest"
)

// Server is an embedded nats-server whose JetStream data lives in a
// directory of the test's, so that a restart keeps the streams.
type Server struct {
	t    testing.TB
	opts server.Options
	srv  *server.Server
	// URL is nats://127.0.0.1:<port> (without credentials).
	URL string
}

// Option changes the server's options before it starts (users, limits).
type Option func(*server.Options)

// WithUser makes the server take only this user.
func WithUser(user, password string) Option {
	return func(o *server.Options) { o.Username, o.Password = user, password }
}

// Start runs a server until the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	port := queuetest.FreePort(t)
	s := &Server{t: t, opts: server.Options{
		ServerName: "sless-test", Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	}}
	for _, o := range opts {
		o(&s.opts)
	}
	s.URL = "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Stop shuts the server down, as a crash of the broker would for its
// clients; Restart brings it back on the same port with the same data.
func (s *Server) Stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Restart starts the server (again).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatalf("nats-server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(20 * time.Second) {
		s.t.Fatal("nats-server did not get ready for connections")
	}
	s.srv = srv
}

// JetStream connects a client (as the server's user, if it has one) for
// the test's own publishing and looking.
func (s *Server) JetStream() (*nats.Conn, jetstream.JetStream) {
	s.t.Helper()
	nc, err := nats.Connect(s.URL, nats.UserInfo(s.opts.Username, s.opts.Password), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		s.t.Fatal(err)
	}
	return nc, js
}

// Stream makes a stream named name capturing subjects.
func (s *Server) Stream(name string, subjects ...string) {
	s.t.Helper()
	_, js := s.JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects, Storage: jetstream.FileStorage}); err != nil {
		s.t.Fatalf("create stream %s: %v", name, err)
	}
}

// Publish publishes n messages to subject with ids prefix-0 … prefix-(n-1)
// (Nats-Msg-Id), each confirmed by the stream.
func Publish(t testing.TB, js jetstream.JetStream, subject, prefix string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := js.Publish(ctx, subject, []byte(`{"n":`+strconv.Itoa(i)+`}`), jetstream.WithMsgID(id)); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
	}
}
