package rabbitmq_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/devices"
	"github.com/sless-dev/sless/pkg/devices/rabbitmq"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/reconciler/device"
	"github.com/sless-dev/sless/pkg/secrets"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// refusals counts the Authority's refusals by reason.
type refusals struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refusals) add(_, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[reason]++
}

func (r *refusals) get(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[reason]
}

// bed is a real apiserver with the device controller running, a real
// RabbitMQ node whose MQTT plugin asks sless's auth endpoints, and its
// management API, through which the controller closes connections.
type bed struct {
	t       *testing.T
	c       client.Client
	ns      string
	rabbit  *testbed.RabbitMQ
	refused *refusals
	authURL string
}

func startBed(t *testing.T) *bed {
	kube := testbed.SharedKube(t)
	b := &bed{t: t, c: kube.Client, ns: kube.Namespace(t), refused: &refusals{n: map[string]int{}}}
	a := &devices.Authority{Dir: devices.ReaderDirectory{Devices: kube.Client, Secrets: kube.Client}, Refused: b.refused.add}
	const token = "broker-token-of-the-test"
	srv := httptest.NewServer(rabbitmq.AuthHandler("/broker/rabbitmq", a, rabbitmq.AuthConfig{Token: token}))
	t.Cleanup(srv.Close)
	b.authURL = srv.URL + "/broker/rabbitmq"
	u, _ := url.Parse(b.authURL)
	u.User = url.UserPassword("rabbitmq", token)
	r, err := testbed.StartRabbitMQWithDeviceAuth(u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	b.rabbit = r
	mgr, err := ctrl.NewManager(kube.Config, ctrl.Options{
		Scheme:  kube.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{b.ns: {}},
			ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: secrets.CacheSelector()}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	mgmt := &rabbitmq.Management{URL: r.ManagementURL, Username: "guest", Password: "guest"}
	if err := device.SetupWithManager(mgr, mgmt); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return b
}

func (b *bed) eventually(what string, limit time.Duration, cond func() (bool, string)) {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	for time.Now().Before(deadline) {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(25 * time.Millisecond)
	}
	b.t.Fatalf("timed out after %s waiting for %s; last: %s", limit, what, last)
}

func (b *bed) get(name string) *slessv1alpha1.IoTDevice {
	b.t.Helper()
	d := &slessv1alpha1.IoTDevice{}
	if err := b.c.Get(context.Background(), types.NamespacedName{Namespace: b.ns, Name: name}, d); err != nil {
		b.t.Fatal(err)
	}
	return d
}

// create makes a device and returns the password the controller issued.
func (b *bed) create(name string) string {
	b.t.Helper()
	d := &slessv1alpha1.IoTDevice{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: name},
		Spec: slessv1alpha1.IoTDeviceSpec{Attributes: map[string]string{"room": "kitchen"}}}
	if err := b.c.Create(context.Background(), d); err != nil {
		b.t.Fatal(err)
	}
	b.eventually("device "+name+" Ready", 30*time.Second, func() (bool, string) {
		c := meta.FindStatusCondition(b.get(name).Status.Conditions, slessv1alpha1.DeviceConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprint(c)
	})
	s := b.secret(name)
	if got := string(s.Data[devices.KeyUsername]); got != b.ns+"/"+name {
		b.t.Errorf("Secret's username %q, want %s/%s", got, b.ns, name)
	}
	if st := b.get(name).Status; st.Username != b.ns+"/"+name || st.CredentialsSecret != names.DeviceSecret(name) {
		b.t.Errorf("status username %q, secret %q", st.Username, st.CredentialsSecret)
	}
	return string(s.Data[devices.KeyPassword])
}

func (b *bed) secret(name string) *corev1.Secret {
	b.t.Helper()
	s := &corev1.Secret{}
	if err := b.c.Get(context.Background(), types.NamespacedName{Namespace: b.ns, Name: names.DeviceSecret(name)}, s); err != nil {
		b.t.Fatal(err)
	}
	return s
}

// device is a paho client connected as a device (or refused).
type mqttDevice struct {
	c    mqtt.Client
	lost chan error
}

func (b *bed) connect(username, password, clientID string) (*mqttDevice, error) {
	d := &mqttDevice{lost: make(chan error, 1)}
	o := mqtt.NewClientOptions().AddBroker(b.rabbit.MQTTURL).SetClientID(clientID).
		SetUsername(username).SetPassword(password).SetCleanSession(true).
		SetAutoReconnect(false).SetConnectTimeout(10 * time.Second).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) { d.lost <- err })
	d.c = mqtt.NewClient(o)
	tok := d.c.Connect()
	if !tok.WaitTimeout(15 * time.Second) {
		return nil, fmt.Errorf("connect timed out")
	}
	if err := tok.Error(); err != nil {
		return nil, err
	}
	b.t.Cleanup(func() { d.c.Disconnect(0) })
	return d, nil
}

func (b *bed) mustConnect(name, password string) *mqttDevice {
	b.t.Helper()
	d, err := b.connect(b.ns+"/"+name, password, b.ns+"/"+name)
	if err != nil {
		b.t.Fatalf("device %s could not connect: %v", name, err)
	}
	return d
}

func (b *bed) refusedConnect(username, password, clientID, reason string) {
	b.t.Helper()
	before := b.refused.get(reason)
	d, err := b.connect(username, password, clientID)
	if err == nil {
		d.c.Disconnect(0)
		b.t.Fatalf("%s connected; want refused (%s)", username, reason)
	}
	if !strings.Contains(strings.ToLower(err.Error()), "not authorized") && !strings.Contains(strings.ToLower(err.Error()), "bad user name or password") {
		b.t.Errorf("%s refused with %v; want the broker's refusal", username, err)
	}
	if got := b.refused.get(reason); got <= before {
		b.t.Errorf("refusals for %s: %d before, %d after; want one more", reason, before, got)
	}
}

func (d *mqttDevice) publish(t *testing.T, topic, payload string) error {
	t.Helper()
	tok := d.c.Publish(topic, 1, false, payload)
	if !tok.WaitTimeout(5 * time.Second) {
		return fmt.Errorf("no PUBACK for %s", topic)
	}
	return tok.Error()
}

func (d *mqttDevice) awaitLost(t *testing.T, what string, limit time.Duration) {
	t.Helper()
	select {
	case <-d.lost:
	case <-time.After(limit):
		t.Fatalf("%s: the device's connection was not closed within %s", what, limit)
	}
}

// listen subscribes RabbitMQ's guest (an internal user, as sless's
// consumers are) to filter.
func (b *bed) listen(filter string) <-chan mqtt.Message {
	b.t.Helper()
	ch := make(chan mqtt.Message, 100)
	o := mqtt.NewClientOptions().AddBroker(b.rabbit.MQTTURL).SetClientID("listener-" + b.ns).
		SetUsername("guest").SetPassword("guest").SetAutoReconnect(false)
	c := mqtt.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(15*time.Second) || tok.Error() != nil {
		b.t.Fatalf("guest connect: %v", tok.Error())
	}
	b.t.Cleanup(func() { c.Disconnect(0) })
	if tok := c.Subscribe(filter, 1, func(_ mqtt.Client, m mqtt.Message) { ch <- m }); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		b.t.Fatalf("guest subscribe: %v", tok.Error())
	}
	return ch
}

func awaitMessage(t *testing.T, ch <-chan mqtt.Message, topic, payload string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-ch:
			if m.Topic() == topic && string(m.Payload()) == payload {
				return
			}
		case <-deadline:
			t.Fatalf("no message %q on %s", payload, topic)
		}
	}
}

func (b *bed) setEnabled(name string, on bool) {
	b.t.Helper()
	d := b.get(name)
	d.Spec.Enabled = ptr.To(on)
	if err := b.c.Update(context.Background(), d); err != nil {
		b.t.Fatal(err)
	}
}

// TestDevicesOnRabbitMQ drives RabbitMQ's MQTT plugin with real devices
// (paho) whose every connect, publish and subscription RabbitMQ asks
// sless's auth endpoints about.
func TestDevicesOnRabbitMQ(t *testing.T) {
	b := startBed(t)
	ns := b.ns
	events := b.listen("devices/" + ns + "/#")
	pw := b.create("thermo")
	if len(pw) != 43 {
		t.Fatalf("issued password %q, want 43 characters", pw)
	}
	otherPW := b.create("door")

	t.Run("only RabbitMQ may ask", func(t *testing.T) {
		resp, err := http.PostForm(b.authURL+"/user", url.Values{"username": {ns + "/thermo"}, "password": {pw}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("auth endpoint without the broker's token: %s, want 401", resp.Status)
		}
	})
	t.Run("a device publishes with its credentials", func(t *testing.T) {
		d := b.mustConnect("thermo", pw)
		if err := d.publish(t, "devices/"+ns+"/thermo/temp", "21.5"); err != nil {
			t.Fatal(err)
		}
		awaitMessage(t, events, "devices/"+ns+"/thermo/temp", "21.5")
		if tok := d.c.Subscribe("commands/"+ns+"/thermo/#", 1, nil); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Errorf("subscribe to its own commands: %v", tok.Error())
		} else if r := tok.(*mqtt.SubscribeToken).Result()["commands/"+ns+"/thermo/#"]; r != 1 {
			t.Errorf("subscribe to its own commands granted QoS %d, want 1", r)
		}
		d.c.Disconnect(100)
	})
	t.Run("a wrong password is refused", func(t *testing.T) {
		b.refusedConnect(ns+"/thermo", otherPW, ns+"/thermo", devices.RefusedPassword)
	})
	t.Run("an unknown device is refused", func(t *testing.T) {
		b.refusedConnect(ns+"/nobody", pw, ns+"/nobody", devices.RefusedUnknown)
	})
	t.Run("another device's client id is refused", func(t *testing.T) {
		b.refusedConnect(ns+"/thermo", pw, ns+"/door", devices.RefusedResource)
	})
	t.Run("another device's commands are refused", func(t *testing.T) {
		d := b.mustConnect("thermo", pw)
		before := b.refused.get(devices.RefusedTopic)
		tok := d.c.Subscribe("commands/"+ns+"/door/#", 1, nil)
		tok.WaitTimeout(5 * time.Second)
		if r, ok := tok.(*mqtt.SubscribeToken).Result()["commands/"+ns+"/door/#"]; ok && r != 0x80 && tok.Error() == nil {
			t.Errorf("subscription to another device's commands granted QoS %d", r)
		}
		if b.refused.get(devices.RefusedTopic) <= before {
			t.Errorf("no topic refusal counted")
		}
	})
	t.Run("another device's topic is refused", func(t *testing.T) {
		d := b.mustConnect("thermo", pw)
		before := b.refused.get(devices.RefusedTopic)
		// MQTT 3.1.1 has no refusal of a publish: RabbitMQ closes the connection.
		_ = d.publish(t, "devices/"+ns+"/door/open", "forged")
		d.awaitLost(t, "a forged publish", 10*time.Second)
		if b.refused.get(devices.RefusedTopic) <= before {
			t.Errorf("no topic refusal counted")
		}
		dd := b.mustConnect("door", otherPW)
		if err := dd.publish(t, "devices/"+ns+"/door/open", "real"); err != nil {
			t.Fatal(err)
		}
		// Messages arrive in order on the listener's one queue: the forged
		// one, had it passed, would come before the real one.
		deadline := time.After(10 * time.Second)
		for {
			select {
			case m := <-events:
				if string(m.Payload()) == "forged" {
					t.Fatalf("the forged message reached %s", m.Topic())
				}
				if string(m.Payload()) == "real" {
					return
				}
			case <-deadline:
				t.Fatal("door's own message did not arrive")
			}
		}
	})
	t.Run("disabling a connected device drops it within 10 s", func(t *testing.T) {
		d := b.mustConnect("thermo", pw)
		start := time.Now()
		b.setEnabled("thermo", false)
		d.awaitLost(t, "disabled", 10*time.Second)
		t.Logf("dropped %s after the update", time.Since(start).Round(time.Millisecond))
		b.refusedConnect(ns+"/thermo", pw, ns+"/thermo", devices.RefusedDisabled)
		c := meta.FindStatusCondition(b.get("thermo").Status.Conditions, slessv1alpha1.DeviceConditionReady)
		if c == nil || c.Reason != slessv1alpha1.DeviceReasonDisabled {
			t.Errorf("Ready %v, want Disabled", c)
		}
		b.setEnabled("thermo", true)
		b.eventually("thermo Ready again", 30*time.Second, func() (bool, string) {
			c := meta.FindStatusCondition(b.get("thermo").Status.Conditions, slessv1alpha1.DeviceConditionReady)
			return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprint(c)
		})
		b.mustConnect("thermo", pw).c.Disconnect(100)
	})
	t.Run("a rotated-away password is refused", func(t *testing.T) {
		d := b.mustConnect("thermo", pw)
		s := b.secret("thermo")
		next, err := devices.NewPassword()
		if err != nil {
			t.Fatal(err)
		}
		devices.SetPassword(s, ns, "thermo", next)
		if err := b.c.Update(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		d.awaitLost(t, "rotated", 10*time.Second)
		b.refusedConnect(ns+"/thermo", pw, ns+"/thermo", devices.RefusedPassword)
		b.mustConnect("thermo", next).c.Disconnect(100)
		if _, kept := b.secret("thermo").Data[devices.KeyPassword]; kept {
			t.Error("the Secret still holds a password after the rotation")
		}
		pw = next
	})
	t.Run("deleting a connected device drops it within 10 s", func(t *testing.T) {
		d := b.mustConnect("door", otherPW)
		if err := b.c.Delete(context.Background(), b.get("door")); err != nil {
			t.Fatal(err)
		}
		d.awaitLost(t, "deleted", 10*time.Second)
		b.refusedConnect(ns+"/door", otherPW, ns+"/door", devices.RefusedUnknown)
	})
}
