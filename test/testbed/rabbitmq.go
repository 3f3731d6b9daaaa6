package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// RabbitMQ is a throwaway RabbitMQ node owned by the test binary: its own
// node name, ports and data directory, so it never touches a system node.
type RabbitMQ struct {
	// URL reaches the node as guest (allowed on loopback).
	URL  string
	Port int
	// MQTTURL reaches its MQTT plugin (tcp://…, as guest), when enabled.
	MQTTURL string
	// ManagementURL reaches its management API (http://…, as guest),
	// when enabled (StartRabbitMQWithDeviceAuth).
	ManagementURL string
	Node          string
	dir           string
	cmd           *exec.Cmd
	done          chan error
	// server and env start the node again on the same data (Restart).
	server string
	env    []string
}

var (
	amqpOnce sync.Once
	amqpURL  string
	amqpErr  error
)

// AMQPURL is a RabbitMQ broker for the test: SLESS_TEST_AMQP_URL, else one
// answering at amqp://guest:guest@127.0.0.1:5672/, else a throwaway node
// started for this test binary. Tests share the broker; give queues names
// from UniqueName and delete them with DeleteQueues.
func AMQPURL(t testing.TB) string {
	t.Helper()
	amqpOnce.Do(func() {
		if u := os.Getenv("SLESS_TEST_AMQP_URL"); u != "" {
			if err := pingAMQP(u); err != nil {
				amqpErr = fmt.Errorf("SLESS_TEST_AMQP_URL %s does not answer: %w", redact(u), err)
				return
			}
			amqpURL = u
			return
		}
		local := "amqp://guest:guest@127.0.0.1:5672/"
		if pingAMQP(local) == nil {
			amqpURL = local
			return
		}
		r, err := StartRabbitMQ()
		if err != nil {
			amqpErr = err
			return
		}
		sharedMu.Lock()
		atExit(r.Stop)
		sharedMu.Unlock()
		amqpURL = r.URL
	})
	if amqpErr != nil {
		t.Fatalf("testbed: RabbitMQ: %v", amqpErr)
	}
	return amqpURL
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "<unparsable URL>"
	}
	return p.Redacted()
}

func pingAMQP(u string) error {
	conn, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	if err != nil {
		return err
	}
	return conn.Close()
}

// UniqueName is prefix with a random suffix, for queues of one test.
func UniqueName(prefix string) string { return prefix + "-" + randomSuffix(6) }

// DeleteQueues deletes the named queues when the test ends.
func DeleteQueues(t testing.TB, u string, names ...string) {
	t.Helper()
	t.Cleanup(func() {
		conn, err := amqp.Dial(u)
		if err != nil {
			t.Logf("testbed: delete queues: %v", err)
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Logf("testbed: delete queues: %v", err)
			return
		}
		for _, n := range names {
			if _, err := ch.QueueDelete(n, false, false, false); err != nil {
				t.Logf("testbed: delete queue %s: %v", n, err)
				if ch, err = conn.Channel(); err != nil {
					return
				}
			}
		}
	})
}

// StartRabbitMQ starts a RabbitMQ node (the Debian rabbitmq-server) in a
// fresh directory on free loopback ports and waits until it accepts AMQP
// connections (about 5 s). No plugins are enabled.
func StartRabbitMQ() (*RabbitMQ, error) { return StartRabbitMQOn("127.0.0.1") }

// StartRabbitMQOn is StartRabbitMQ listening on ip instead, with guest
// allowed from elsewhere than loopback: on NodeHostIP, pods on the node
// reach it (the machine's own addresses are not reachable from there).
func StartRabbitMQOn(ip string) (*RabbitMQ, error) { return startRabbitMQ(ip, rabbitOptions{}) }

// StartRabbitMQWithMQTT is StartRabbitMQ with the rabbitmq_mqtt plugin
// enabled, its MQTT listener on another free loopback port (MQTTURL).
func StartRabbitMQWithMQTT() (*RabbitMQ, error) {
	return startRabbitMQ("127.0.0.1", rabbitOptions{mqtt: true})
}

// StartRabbitMQWithDeviceAuth is StartRabbitMQWithMQTT with the management
// API (ManagementURL) and the HTTP auth backend enabled, asking the four
// endpoints under authBase (…/user, /vhost, /resource, /topic, by POST)
// about every user its internal backend, tried first, does not know: the
// layout docs/devices.md gives for a cluster.
func StartRabbitMQWithDeviceAuth(authBase string) (*RabbitMQ, error) {
	return startRabbitMQ("127.0.0.1", rabbitOptions{mqtt: true, authBase: authBase})
}

type rabbitOptions struct {
	mqtt     bool
	authBase string
}

func startRabbitMQ(ip string, o rabbitOptions) (*RabbitMQ, error) {
	// Debian's /usr/sbin/rabbitmq-server switches to the rabbitmq user when
	// run as root; the script behind it runs the node as whoever calls it,
	// which keeps the node's files in our directory and readable.
	server := "/usr/lib/rabbitmq/bin/rabbitmq-server"
	if _, err := os.Stat(server); err != nil {
		if server, err = exec.LookPath("rabbitmq-server"); err != nil {
			return nil, errors.New("rabbitmq-server not found: install RabbitMQ (apt-get install rabbitmq-server) or set SLESS_TEST_AMQP_URL")
		}
	}
	dir, err := os.MkdirTemp("", "sless-rabbitmq-")
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	dist, err := FreePort()
	if err != nil {
		return nil, err
	}
	r := &RabbitMQ{Port: port, Node: "sless-test-" + randomSuffix(4) + "@localhost", dir: dir, done: make(chan error, 1)}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	r.URL = "amqp://guest:guest@" + addr + "/"
	enabled, config := "[].\n", "listeners.tcp.1 = "+addr+"\nloopback_users.guest = "+strconv.FormatBool(ip == "127.0.0.1")+"\n"
	if o.mqtt {
		mport, err := FreePort()
		if err != nil {
			return nil, err
		}
		maddr := net.JoinHostPort(ip, strconv.Itoa(mport))
		r.MQTTURL = "tcp://" + maddr
		enabled = "[rabbitmq_mqtt].\n"
		config += "mqtt.listeners.tcp.1 = " + maddr + "\nmqtt.allow_anonymous = false\n"
	}
	if o.authBase != "" {
		hport, err := FreePort()
		if err != nil {
			return nil, err
		}
		r.ManagementURL = "http://" + net.JoinHostPort(ip, strconv.Itoa(hport))
		enabled = "[rabbitmq_mqtt,rabbitmq_management,rabbitmq_auth_backend_http].\n"
		config += "management.tcp.ip = " + ip + "\nmanagement.tcp.port = " + strconv.Itoa(hport) + "\n" +
			"auth_backends.1 = internal\nauth_backends.2 = http\nauth_http.http_method = post\n"
		for _, p := range []string{"user", "vhost", "resource", "topic"} {
			config += "auth_http." + p + "_path = " + strings.TrimSuffix(o.authBase, "/") + "/" + p + "\n"
		}
	}
	plugins := filepath.Join(dir, "enabled_plugins")
	if err := os.WriteFile(plugins, []byte(enabled), 0o644); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "rabbitmq.conf")
	if err := os.WriteFile(conf, []byte(config), 0o644); err != nil {
		return nil, err
	}
	r.server = server
	r.env = append(os.Environ(),
		"RABBITMQ_NODENAME="+r.Node,
		"RABBITMQ_NODE_IP_ADDRESS="+ip,
		"RABBITMQ_NODE_PORT="+strconv.Itoa(port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(dist),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "pid"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+plugins,
		"RABBITMQ_CONFIG_FILE="+conf,
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(dir, "advanced.config"),
		"RABBITMQ_LOGS="+filepath.Join(dir, "log", "node.log"),
		"RABBITMQ_FEATURE_FLAGS_FILE="+filepath.Join(dir, "feature_flags"),
		"ERL_CRASH_DUMP="+filepath.Join(dir, "erl_crash.dump"),
		// The Erlang cookie is made in HOME: keep it out of the user's.
		"HOME="+dir,
	)
	if err := r.launch(addr); err != nil {
		return nil, err
	}
	return r, nil
}

// launch starts the node on its directory and waits until it accepts AMQP
// connections.
func (r *RabbitMQ) launch(addr string) error {
	dir := r.dir
	r.done = make(chan error, 1)
	cmd := exec.Command(r.server)
	cmd.Env = r.env
	cmd.Dir = dir
	log, err := os.OpenFile(filepath.Join(dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so Stop ends the Erlang VM and its helpers.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start rabbitmq-server: %w", err)
	}
	r.cmd = cmd
	go func() { r.done <- cmd.Wait(); log.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			if pingAMQP(r.URL) == nil && r.mqttListens() && r.managementAnswers() {
				return nil
			}
		}
		select {
		case err := <-r.done:
			out, _ := os.ReadFile(filepath.Join(dir, "stdout.log"))
			r.done <- err
			r.Stop()
			return fmt.Errorf("rabbitmq-server exited: %v\n%s", err, out)
		case <-ctx.Done():
			out, _ := os.ReadFile(filepath.Join(dir, "stdout.log"))
			r.Stop()
			return fmt.Errorf("rabbitmq-server did not accept AMQP connections within 3 minutes:\n%s", out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// mqttListens says whether the MQTT plugin accepts connections, or is off.
func (r *RabbitMQ) mqttListens() bool {
	if r.MQTTURL == "" {
		return true
	}
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(r.MQTTURL, "tcp://"), 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// managementAnswers says whether the management API answers, or is off.
func (r *RabbitMQ) managementAnswers() bool {
	if r.ManagementURL == "" {
		return true
	}
	req, err := http.NewRequest(http.MethodGet, r.ManagementURL+"/api/overview", nil)
	if err != nil {
		return false
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := (&http.Client{Timeout: time.Second}).Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Restart stops the node and starts it again on the same data and ports:
// durable queues and persistent messages outlive it, as on a broker's
// restart.
func (r *RabbitMQ) Restart() error {
	r.halt()
	u, err := url.Parse(r.URL)
	if err != nil {
		return err
	}
	return r.launch(u.Host)
}

// Stop ends the node and removes its files. (Its epmd, shared by every
// Erlang node of the machine, keeps running, as it does after any node.)
func (r *RabbitMQ) Stop() {
	r.halt()
	_ = os.RemoveAll(r.dir)
}

// halt ends the node's processes and keeps its files.
func (r *RabbitMQ) halt() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
		r.cmd = nil
	}
}
