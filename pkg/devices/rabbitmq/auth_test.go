package rabbitmq_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/devices"
	"github.com/sless-dev/sless/pkg/devices/rabbitmq"
)

type oneDevice struct{}

func (oneDevice) Device(_ context.Context, ns, name string) (*slessv1alpha1.IoTDevice, error) {
	if ns+"/"+name != "a/thermo" {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "iotdevices"}, name)
	}
	return &slessv1alpha1.IoTDevice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, nil
}

func (oneDevice) PasswordHash(context.Context, string, string) (string, error) {
	return devices.HashPassword("pw"), nil
}

// The endpoints' answers to what RabbitMQ sends, and to what it never
// should: each request a row.
func TestAuthHandler(t *testing.T) {
	h := rabbitmq.AuthHandler("/auth", &devices.Authority{Dir: oneDevice{}}, rabbitmq.AuthConfig{Token: "tok"})
	cases := []struct {
		name, method, path, token, body string
		code                            int
		want                            string
	}{
		{"user", "POST", "/auth/user", "tok", "username=a/thermo&password=pw", 200, "allow"},
		{"user by GET", "GET", "/auth/user?username=a/thermo&password=pw", "tok", "", 200, "allow"},
		{"user own client id", "POST", "/auth/user", "tok", "username=a/thermo&password=pw&client_id=a/thermo-1", 200, "allow"},
		{"user another's client id", "POST", "/auth/user", "tok", "username=a/thermo&password=pw&client_id=a/thermostat", 200, "deny"},
		{"user wrong password", "POST", "/auth/user", "tok", "username=a/thermo&password=x", 200, "deny"},
		{"user no password", "POST", "/auth/user", "tok", "username=a/thermo", 200, "deny"},
		{"user not a device", "POST", "/auth/user", "tok", "username=guest&password=guest", 200, "deny"},
		{"vhost", "POST", "/auth/vhost", "tok", "username=a/thermo&vhost=/&ip=127.0.0.1", 200, "allow"},
		{"other vhost", "POST", "/auth/vhost", "tok", "username=a/thermo&vhost=prod&ip=127.0.0.1", 200, "deny"},
		{"exchange write", "POST", "/auth/resource", "tok", "username=a/thermo&vhost=/&resource=exchange&name=amq.topic&permission=write", 200, "allow"},
		{"exchange configure", "POST", "/auth/resource", "tok", "username=a/thermo&vhost=/&resource=exchange&name=amq.topic&permission=configure", 200, "deny"},
		{"other exchange", "POST", "/auth/resource", "tok", "username=a/thermo&vhost=/&resource=exchange&name=amq.direct&permission=write", 200, "deny"},
		{"own queue", "POST", "/auth/resource", "tok", "username=a/thermo&vhost=/&resource=queue&name=mqtt-subscription-a/thermoqos1&permission=configure", 200, "allow"},
		{"another's queue", "POST", "/auth/resource", "tok", "username=a/thermo&vhost=/&resource=queue&name=mqtt-subscription-a/doorqos1&permission=read", 200, "deny"},
		{"a queue", "POST", "/auth/resource", "tok", "username=a/thermo&vhost=/&resource=queue&name=orders&permission=read", 200, "deny"},
		{"unknown resource", "POST", "/auth/resource", "tok", "username=a/thermo&vhost=/&resource=stream&name=x&permission=read", 200, "deny"},
		{"publish own", "POST", "/auth/topic", "tok", "username=a/thermo&vhost=/&resource=topic&name=amq.topic&permission=write&routing_key=devices.a.thermo.temp", 200, "allow"},
		{"publish another's", "POST", "/auth/topic", "tok", "username=a/thermo&vhost=/&resource=topic&name=amq.topic&permission=write&routing_key=devices.a.door.temp", 200, "deny"},
		{"subscribe own", "POST", "/auth/topic", "tok", "username=a/thermo&vhost=/&resource=topic&name=amq.topic&permission=read&routing_key=commands.a.thermo.%23", 200, "allow"},
		{"subscribe any device", "POST", "/auth/topic", "tok", "username=a/thermo&vhost=/&resource=topic&name=amq.topic&permission=read&routing_key=commands.a.*.%23", 200, "deny"},
		{"topic of another exchange", "POST", "/auth/topic", "tok", "username=a/thermo&vhost=/&resource=topic&name=x&permission=write&routing_key=devices.a.thermo", 200, "deny"},
		{"topic configure", "POST", "/auth/topic", "tok", "username=a/thermo&vhost=/&resource=topic&name=amq.topic&permission=configure&routing_key=devices.a.thermo", 200, "deny"},
		{"no token", "POST", "/auth/user", "", "username=a/thermo&password=pw", 401, ""},
		{"wrong token", "POST", "/auth/user", "tak", "username=a/thermo&password=pw", 401, ""},
		{"PUT", "PUT", "/auth/user", "tok", "username=a/thermo&password=pw", 405, ""},
		{"bad escape", "POST", "/auth/user", "tok", "username=%zz", 400, ""},
		{"unknown path", "POST", "/auth/other", "tok", "username=a/thermo", 404, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tc.token != "" {
				r.SetBasicAuth("rabbitmq", tc.token)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			body, _ := io.ReadAll(w.Result().Body)
			if w.Code != tc.code || (tc.want != "" && string(body) != tc.want) {
				t.Errorf("%d %q, want %d %q", w.Code, body, tc.code, tc.want)
			}
		})
	}
}

func TestTopicOf(t *testing.T) {
	for rk, want := range map[string]string{"devices.a.thermo.temp": "devices/a/thermo/temp", "commands.a.*.#": "commands/a/+/#", "x": "x"} {
		if got := rabbitmq.TopicOf(rk); got != want {
			t.Errorf("TopicOf(%q) = %q, want %q", rk, got, want)
		}
	}
}
