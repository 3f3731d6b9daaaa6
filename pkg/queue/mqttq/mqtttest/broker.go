// Package mqtttest runs real MQTT brokers for tests: a Mosquitto 2 of the
// test's own (Debian's mosquitto, on a free loopback port, its config and
// persistence in the test's directory), never the machine's, and a client
// that publishes and subscribes at QoS 1.
package mqtttest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/sless-dev/sless/pkg/queue/queuetest"
)

// Mosquitto is a mosquitto process whose persistence survives Restart, so
// QoS 1 messages of persistent sessions outlive an outage.
type Mosquitto struct {
	t    testing.TB
	dir  string
	conf string
	port int
	// URL is tcp://127.0.0.1:<port> (without credentials).
	URL string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan error
}

// Option changes the broker's configuration.
type Option func(*settings)

type settings struct {
	user, password string
	cert, key      []byte
}

// WithUser makes the broker take only this user (no anonymous clients).
func WithUser(user, password string) Option {
	return func(s *settings) { s.user, s.password = user, password }
}

// WithTLS makes the listener take TLS only, with this PEM certificate and
// key; URL is then ssl://.
func WithTLS(cert, key []byte) Option {
	return func(s *settings) { s.cert, s.key = cert, key }
}

// binary finds mosquitto; Debian installs it in /usr/sbin.
func binary(name string) (string, error) {
	for _, p := range []string{"/usr/sbin/" + name, "/usr/bin/" + name} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found: install Mosquitto 2 (hack/deps.sh mqtt, or apt-get install mosquitto)", name)
}

// StartMosquitto runs a broker until the test ends.
func StartMosquitto(t testing.TB, opts ...Option) *Mosquitto {
	t.Helper()
	bin, err := binary("mosquitto")
	if err != nil {
		t.Fatal(err)
	}
	var s settings
	for _, o := range opts {
		o(&s)
	}
	port := queuetest.FreePort(t)
	m := &Mosquitto{t: t, dir: t.TempDir(), port: port, URL: "tcp://127.0.0.1:" + strconv.Itoa(port)}
	conf := []string{
		"listener " + strconv.Itoa(port) + " 127.0.0.1",
		// As root mosquitto would switch to its own user, who cannot
		// write the test's directory.
		"user root",
		"persistence true",
		"persistence_location " + m.dir + "/",
		"log_dest file " + filepath.Join(m.dir, "mosquitto.log"),
		"log_type error",
		"log_type warning",
		"log_type notice",
		// A thousand messages queued for a session that is away.
		"max_queued_messages 100000",
	}
	if s.cert != nil {
		cert, key := filepath.Join(m.dir, "tls.crt"), filepath.Join(m.dir, "tls.key")
		if err := os.WriteFile(cert, s.cert, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(key, s.key, 0o600); err != nil {
			t.Fatal(err)
		}
		// The listener's own settings: it is the last one above.
		conf = append(conf, "certfile "+cert, "keyfile "+key)
		m.URL = "ssl://127.0.0.1:" + strconv.Itoa(port)
	}
	if s.user == "" {
		conf = append(conf, "allow_anonymous true")
	} else {
		passwd, err := binary("mosquitto_passwd")
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(m.dir, "passwd")
		if out, err := exec.Command(passwd, "-b", "-c", file, s.user, s.password).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_passwd: %v: %s", err, out)
		}
		conf = append(conf, "allow_anonymous false", "password_file "+file)
	}
	m.conf = filepath.Join(m.dir, "mosquitto.conf")
	if err := os.WriteFile(m.conf, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m.start(bin)
	t.Cleanup(m.Stop)
	return m
}

func (m *Mosquitto) start(bin string) {
	m.t.Helper()
	cmd := exec.Command(bin, "-c", m.conf)
	out, err := os.OpenFile(filepath.Join(m.dir, "stdout.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		m.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("start mosquitto: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); out.Close() }()
	m.mu.Lock()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(m.port), 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		select {
		case err := <-done:
			log, _ := os.ReadFile(filepath.Join(m.dir, "mosquitto.log"))
			so, _ := os.ReadFile(filepath.Join(m.dir, "stdout.log"))
			m.t.Fatalf("mosquitto exited: %v\n%s%s", err, so, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.t.Fatal("mosquitto did not listen within 20 s")
		}
	}
}

// Stop ends the broker as an orderly shutdown does (SIGTERM: mosquitto
// writes its persistence file); Restart brings it back with that state.
func (m *Mosquitto) Stop() {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart starts a stopped broker again on the same port and persistence.
func (m *Mosquitto) Restart() {
	m.t.Helper()
	bin, err := binary("mosquitto")
	if err != nil {
		m.t.Fatal(err)
	}
	m.start(bin)
}

// Client is a test's own MQTT 3.1.1 client, connected until the test ends.
type Client struct {
	t testing.TB
	mqtt.Client
}

// Connect connects a client to url in a persistent session of its own, so
// that its subscriptions, and what they receive, outlast a broker restart.
func Connect(t testing.TB, url, user, password string) *Client {
	t.Helper()
	o := mqtt.NewClientOptions().AddBroker(url).SetClientID("sless-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)).
		SetUsername(user).SetPassword(password).SetCleanSession(false).SetResumeSubs(true).SetAutoReconnect(true).SetConnectRetry(true).
		SetOrderMatters(false).SetConnectTimeout(5 * time.Second)
	c := mqtt.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtt connect to %s: %v", url, tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(500) })
	return &Client{t: t, Client: c}
}

// Publish publishes each payload to topic at QoS 1 and waits until the
// broker acknowledged them all.
func (c *Client) Publish(topic string, payloads ...string) {
	c.t.Helper()
	toks := make([]mqtt.Token, len(payloads))
	for i, p := range payloads {
		toks[i] = c.Client.Publish(topic, 1, false, p)
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(60*time.Second) || tok.Error() != nil {
			c.t.Fatalf("publish %q to %s: %v", payloads[i], topic, errors.Join(tok.Error(), errors.New("no PUBACK within 60 s")))
		}
	}
}

// Subscribe subscribes to filter at QoS 1; the messages arrive on the channel.
func (c *Client) Subscribe(filter string) <-chan mqtt.Message {
	c.t.Helper()
	ch := make(chan mqtt.Message, 10000)
	tok := c.Client.Subscribe(filter, 1, func(_ mqtt.Client, m mqtt.Message) { ch <- m })
	if !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		c.t.Fatalf("subscribe %s: %v", filter, tok.Error())
	}
	return ch
}

// Await waits for the next message on ch.
func Await(t testing.TB, ch <-chan mqtt.Message, limit time.Duration) mqtt.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	select {
	case m := <-ch:
		return m
	case <-ctx.Done():
		t.Fatalf("no message within %v", limit)
		return nil
	}
}

// Prime makes the persistent session of clientID on url subscribed to
// filter at QoS 1, and leaves it: what is published next waits in it for
// the client that connects with that id.
func Prime(t testing.TB, url, clientID, filter string) {
	t.Helper()
	o := mqtt.NewClientOptions().AddBroker(url).SetClientID(clientID).SetCleanSession(false).SetConnectTimeout(5 * time.Second)
	c := mqtt.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtt connect to %s as %s: %v", url, clientID, tok.Error())
	}
	defer c.Disconnect(250)
	if tok := c.Subscribe(filter, 1, nil); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s: %v", filter, tok.Error())
	}
}
