package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/devices"
)

// Devices through the REST API: the generic routes, the rotation that
// shows a password once, and the refusals of bad input.
func TestDevices(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	r := e.do("POST", e.path("devices"), tok, map[string]any{"metadata": map[string]any{"name": "thermo"},
		"spec": map[string]any{"attributes": map[string]any{"room": "kitchen"}}})
	want(t, r, http.StatusCreated)

	rotate := func() devices.Credentials {
		t.Helper()
		r := e.do("POST", e.path("devices", "thermo", "rotate"), tok, nil)
		want(t, r, http.StatusOK)
		var c devices.Credentials
		if err := json.Unmarshal(r.Body, &c); err != nil {
			t.Fatal(err)
		}
		if r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control %q, want no-store", r.Header.Get("Cache-Control"))
		}
		return c
	}
	first := rotate()
	if first.Username != e.ns+"/thermo" || len(first.Password) != 43 || first.Secret != "thermo-device-credentials" {
		t.Fatalf("credentials %+v", first)
	}
	second := rotate()
	if second.Password == first.Password || second.CredentialsID == first.CredentialsID {
		t.Fatal("a rotation gave the same password")
	}
	s := &corev1.Secret{}
	if err := e.kube.Client.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: second.Secret}, s); err != nil {
		t.Fatal(err)
	}
	if !devices.CheckPassword(devices.PasswordHash(s), second.Password) || devices.CheckPassword(devices.PasswordHash(s), first.Password) {
		t.Error("the Secret does not hold the last password's hash alone")
	}
	if _, ok := s.Data[devices.KeyPassword]; ok {
		t.Error("the Secret holds the password itself")
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "IoTDevice" {
		t.Errorf("owners %v, want the device", s.OwnerReferences)
	}
	got := e.do("GET", e.path("devices", "thermo"), tok, nil)
	want(t, got, http.StatusOK)
	if strings.Contains(string(got.Body), second.Password) {
		t.Error("GET shows the password")
	}

	bad := []struct {
		name, method, path string
		body               any
		code               int
		field              string
	}{
		{"function and trigger", "POST", e.path("devices"), map[string]any{"metadata": map[string]any{"name": "d1"}, "spec": map[string]any{"function": "f", "trigger": "t"}}, 400, "spec.trigger"},
		{"bad function", "POST", e.path("devices"), map[string]any{"metadata": map[string]any{"name": "d2"}, "spec": map[string]any{"function": "F"}}, 400, "spec.function"},
		{"bad trigger", "POST", e.path("devices"), map[string]any{"metadata": map[string]any{"name": "d3"}, "spec": map[string]any{"trigger": "a_b"}}, 400, "spec.trigger"},
		{"attribute name", "POST", e.path("devices"), map[string]any{"metadata": map[string]any{"name": "d4"}, "spec": map[string]any{"attributes": map[string]any{"a b": "x"}}}, 400, "spec.attributes"},
		{"attribute value", "POST", e.path("devices"), map[string]any{"metadata": map[string]any{"name": "d5"}, "spec": map[string]any{"attributes": map[string]any{"a": strings.Repeat("x", 257)}}}, 400, "spec.attributes"},
		{"attribute not a string", "POST", e.path("devices"), map[string]any{"metadata": map[string]any{"name": "d6"}, "spec": map[string]any{"attributes": map[string]any{"a": 1}}}, 400, ""},
		{"enabled not a boolean", "POST", e.path("devices"), map[string]any{"metadata": map[string]any{"name": "d7"}, "spec": map[string]any{"enabled": "yes"}}, 400, ""},
		{"unknown field", "POST", e.path("devices"), map[string]any{"metadata": map[string]any{"name": "d8"}, "spec": map[string]any{"password": "x"}}, 400, ""},
		{"name with a dot", "POST", e.path("devices"), map[string]any{"metadata": map[string]any{"name": "d.9"}}, 400, "metadata.name"},
		{"name too long", "POST", e.path("devices"), map[string]any{"metadata": map[string]any{"name": strings.Repeat("d", 64)}}, 400, "metadata.name"},
		{"rotate a missing device", "POST", e.path("devices", "nobody", "rotate"), nil, 404, ""},
		{"rotate a bad name", "POST", e.path("devices", "No_Body", "rotate"), nil, 400, ""},
		{"rotate by GET", "GET", e.path("devices", "thermo", "rotate"), nil, 405, ""},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			r := e.do(b.method, b.path, tok, b.body)
			if r.Code != b.code {
				t.Fatalf("%d %s, want %d", r.Code, r.Body, b.code)
			}
			if b.field != "" && !strings.Contains(string(r.Body), b.field) {
				t.Errorf("problem does not name %s: %s", b.field, r.Body)
			}
		})
	}
	t.Run("another tenant may not rotate", func(t *testing.T) {
		other := e.token("mallory", "sless.dev/namespace", "t-other")
		if r := e.do("POST", e.path("devices", "thermo", "rotate"), other, nil); r.Code != http.StatusForbidden {
			t.Errorf("%d %s, want 403", r.Code, r.Body)
		}
	})
}
