package devices_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/devices"
)

func TestParseUsername(t *testing.T) {
	cases := []struct {
		in       string
		ns, name string
		ok       bool
	}{
		{"team-a/thermo", "team-a", "thermo", true},
		{"team-a/thermo-2", "team-a", "thermo-2", true},
		{"guest", "", "", false},
		{"team-a/", "", "", false},
		{"/thermo", "", "", false},
		{"team-a/thermo/x", "", "", false},
		{"Team-a/thermo", "", "", false},
		{"team-a/the.rmo", "", "", false},
		{"vhost:team-a/thermo", "", "", false},
	}
	for _, tc := range cases {
		ns, name, ok := devices.ParseUsername(tc.in)
		if ns != tc.ns || name != tc.name || ok != tc.ok {
			t.Errorf("ParseUsername(%q) = %q, %q, %v; want %q, %q, %v", tc.in, ns, name, ok, tc.ns, tc.name, tc.ok)
		}
	}
}

func TestDeviceOfTopic(t *testing.T) {
	cases := []struct {
		topic, ns, name, rest string
		ok                    bool
	}{
		{"devices/a/thermo", "a", "thermo", "", true},
		{"devices/a/thermo/temp", "a", "thermo", "temp", true},
		{"devices/a/thermo/temp/inside", "a", "thermo", "temp/inside", true},
		{"devices/a", "", "", "", false},
		{"commands/a/thermo", "", "", "", false},
		{"devices/A/thermo", "", "", "", false},
		{"devices/a/+/x", "", "", "", false},
	}
	for _, tc := range cases {
		ns, name, rest, ok := devices.DeviceOfTopic(tc.topic)
		if ns != tc.ns || name != tc.name || rest != tc.rest || ok != tc.ok {
			t.Errorf("DeviceOfTopic(%q) = %q %q %q %v", tc.topic, ns, name, rest, ok)
		}
	}
}

func TestPasswords(t *testing.T) {
	p, err := devices.NewPassword()
	if err != nil {
		t.Fatal(err)
	}
	q, _ := devices.NewPassword()
	h := devices.HashPassword(p)
	switch {
	case p == q:
		t.Fatal("two passwords alike")
	case !devices.CheckPassword(h, p):
		t.Error("a password does not check against its hash")
	case devices.CheckPassword(h, q), devices.CheckPassword(h, ""), devices.CheckPassword("", ""):
		t.Error("a wrong or empty password checks")
	case devices.CredentialsID(h) == devices.CredentialsID(devices.HashPassword(q)) || len(devices.CredentialsID(h)) != 12:
		t.Errorf("credentials ids %q", devices.CredentialsID(h))
	}
}

// dir is a Directory of fixed devices and hashes.
type dir struct {
	devs   map[string]*slessv1alpha1.IoTDevice
	hashes map[string]string
}

func (d dir) Device(_ context.Context, ns, name string) (*slessv1alpha1.IoTDevice, error) {
	if dev, ok := d.devs[ns+"/"+name]; ok {
		return dev, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "sless.dev", Resource: "iotdevices"}, name)
}

func (d dir) PasswordHash(_ context.Context, ns, name string) (string, error) {
	return d.hashes[ns+"/"+name], nil
}

func TestAuthority(t *testing.T) {
	dev := func(name string, enabled bool) *slessv1alpha1.IoTDevice {
		return &slessv1alpha1.IoTDevice{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name}, Spec: slessv1alpha1.IoTDeviceSpec{Enabled: ptr.To(enabled)}}
	}
	refused := map[string]int{}
	a := &devices.Authority{
		Dir: dir{
			devs:   map[string]*slessv1alpha1.IoTDevice{"a/thermo": dev("thermo", true), "a/off": dev("off", false), "a/nohash": dev("nohash", true)},
			hashes: map[string]string{"a/thermo": devices.HashPassword("pw"), "a/off": devices.HashPassword("pw")},
		},
		Refused: func(ns, reason string) { refused[ns+" "+reason]++ },
	}
	ctx := context.Background()
	cases := []struct {
		name   string
		decide func() (devices.Decision, error)
		reason string // "" allows
	}{
		{"connect", func() (devices.Decision, error) { return a.Authenticate(ctx, "a/thermo", "pw") }, ""},
		{"wrong password", func() (devices.Decision, error) { return a.Authenticate(ctx, "a/thermo", "pw2") }, devices.RefusedPassword},
		{"empty password", func() (devices.Decision, error) { return a.Authenticate(ctx, "a/nohash", "") }, devices.RefusedPassword},
		{"disabled", func() (devices.Decision, error) { return a.Authenticate(ctx, "a/off", "pw") }, devices.RefusedDisabled},
		{"unknown", func() (devices.Decision, error) { return a.Authenticate(ctx, "a/none", "pw") }, devices.RefusedUnknown},
		{"not a device", func() (devices.Decision, error) { return a.Authenticate(ctx, "guest", "guest") }, devices.RefusedNotADevice},
		{"publish own", func() (devices.Decision, error) { return a.MayPublish(ctx, "a/thermo", "devices/a/thermo/temp") }, ""},
		{"publish own root", func() (devices.Decision, error) { return a.MayPublish(ctx, "a/thermo", "devices/a/thermo") }, ""},
		{"publish another's", func() (devices.Decision, error) { return a.MayPublish(ctx, "a/thermo", "devices/a/thermo2/temp") }, devices.RefusedTopic},
		{"publish commands", func() (devices.Decision, error) { return a.MayPublish(ctx, "a/thermo", "commands/a/thermo") }, devices.RefusedTopic},
		{"publish other namespace", func() (devices.Decision, error) { return a.MayPublish(ctx, "a/thermo", "devices/b/thermo") }, devices.RefusedTopic},
		{"publish disabled", func() (devices.Decision, error) { return a.MayPublish(ctx, "a/off", "devices/a/off") }, devices.RefusedDisabled},
		{"subscribe own", func() (devices.Decision, error) { return a.MaySubscribe(ctx, "a/thermo", "commands/a/thermo/#") }, ""},
		{"subscribe wildcard device", func() (devices.Decision, error) { return a.MaySubscribe(ctx, "a/thermo", "commands/a/+/#") }, devices.RefusedTopic},
		{"subscribe all", func() (devices.Decision, error) { return a.MaySubscribe(ctx, "a/thermo", "#") }, devices.RefusedTopic},
		{"subscribe events", func() (devices.Decision, error) { return a.MaySubscribe(ctx, "a/thermo", "devices/a/thermo") }, devices.RefusedTopic},
	}
	for _, tc := range cases {
		d, err := tc.decide()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if d.Allow != (tc.reason == "") || d.Reason != tc.reason {
			t.Errorf("%s: %+v, want reason %q", tc.name, d, tc.reason)
		}
	}
	if refused["a "+devices.RefusedTopic] != 6 || refused[" "+devices.RefusedNotADevice] != 1 {
		t.Errorf("refusals counted %v", refused)
	}
}
