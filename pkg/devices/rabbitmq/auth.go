// Package rabbitmq adapts sless's device authority (pkg/devices) to
// RabbitMQ: the four endpoints of its HTTP auth backend
// (rabbitmq_auth_backend_http), for the devices that reach its MQTT
// plugin, and its management API, through which a device's live
// connections are closed.
package rabbitmq

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sless-dev/sless/pkg/devices"
)

// QueuePrefix starts the name of every queue the MQTT plugin declares for
// a subscribing client: mqtt-subscription-{client id}qos{0,1}.
const QueuePrefix = "mqtt-subscription-"

// AuthConfig configures the auth endpoints.
type AuthConfig struct {
	// VHost is the one virtual host devices may use; "/" when empty.
	VHost string
	// Exchange is the MQTT plugin's exchange (mqtt.exchange); amq.topic
	// when empty.
	Exchange string
	// Token, when set, must come as the password of HTTP basic auth (any
	// username): RabbitMQ sends the user info of the configured URLs
	// (http://sless:TOKEN@host/…), so only it may ask.
	Token string
	Log   *slog.Logger
}

// AuthHandler serves RabbitMQ's HTTP auth backend for devices at
// {prefix}/user, /vhost, /resource and /topic, answering 200 with allow
// or deny, for GET (query) and POST (form) alike. Users that are not
// devices are denied: RabbitMQ's own users (sless's consumers among them)
// are its internal backend's, which goes first (auth_backends.1 =
// internal, auth_backends.2 = http).
func AuthHandler(prefix string, a *devices.Authority, cfg AuthConfig) http.Handler {
	if cfg.VHost == "" {
		cfg.VHost = "/"
	}
	if cfg.Exchange == "" {
		cfg.Exchange = "amq.topic"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	h := &authHandler{a: a, cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc(prefix+"/user", h.serve(h.user))
	mux.HandleFunc(prefix+"/vhost", h.serve(h.vhost))
	mux.HandleFunc(prefix+"/resource", h.serve(h.resource))
	mux.HandleFunc(prefix+"/topic", h.serve(h.topic))
	return mux
}

type authHandler struct {
	a   *devices.Authority
	cfg AuthConfig
}

type params func(string) string

func (h *authHandler) serve(decide func(context.Context, params) (devices.Decision, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
			return
		}
		if h.cfg.Token != "" {
			_, pass, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(pass), []byte(h.cfg.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="sless broker auth"`)
				http.Error(w, "the broker's token is missing or wrong", http.StatusUnauthorized)
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "unreadable parameters: "+err.Error(), http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		d, err := decide(ctx, r.Form.Get)
		if err != nil {
			h.cfg.Log.Warn("device auth: lookup failed, refused", "path", r.URL.Path, "username", r.Form.Get("username"), "err", err)
		} else if !d.Allow {
			h.cfg.Log.Info("device auth: refused", "path", r.URL.Path, "username", r.Form.Get("username"), "reason", d.Reason,
				"resource", r.Form.Get("resource"), "name", r.Form.Get("name"), "permission", r.Form.Get("permission"), "routing_key", r.Form.Get("routing_key"))
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if d.Allow {
			_, _ = w.Write([]byte("allow"))
			return
		}
		_, _ = w.Write([]byte("deny"))
	}
}

// user: a connect, with the device's username and password (and, from
// the MQTT plugin, its client id, which must be the username or start
// with it and a dash, so one device cannot take another's session).
func (h *authHandler) user(ctx context.Context, p params) (devices.Decision, error) {
	username := p("username")
	if id := p("client_id"); id != "" && !ownsClientID(username, id) {
		return h.a.Refuse(username, devices.RefusedResource), nil
	}
	return h.a.Authenticate(ctx, username, p("password"))
}

func ownsClientID(username, id string) bool {
	return id == username || strings.HasPrefix(id, username+"-")
}

func (h *authHandler) vhost(ctx context.Context, p params) (devices.Decision, error) {
	if p("vhost") != h.cfg.VHost {
		return h.a.Refuse(p("username"), devices.RefusedResource), nil
	}
	return h.a.MayConnect(ctx, p("username"))
}

// resource: the plugin's exchange (to publish, and to bind the device's
// subscription queue), and the device's own subscription queues, whose
// names hold its client id.
func (h *authHandler) resource(ctx context.Context, p params) (devices.Decision, error) {
	username := p("username")
	ok := p("vhost") == h.cfg.VHost
	switch p("resource") {
	case "exchange":
		ok = ok && p("name") == h.cfg.Exchange && (p("permission") == "write" || p("permission") == "read")
	case "queue":
		ok = ok && strings.HasPrefix(p("name"), QueuePrefix+username)
	case "topic":
		// Topic permissions come to the topic path; this one grants the exchange.
		ok = ok && p("name") == h.cfg.Exchange
	default:
		ok = false
	}
	if !ok {
		return h.a.Refuse(username, devices.RefusedResource), nil
	}
	return h.a.MayConnect(ctx, username)
}

// topic: a publish (write) or a subscription (read) on the plugin's
// exchange, whose routing key is the MQTT topic with / as . and + as *.
func (h *authHandler) topic(ctx context.Context, p params) (devices.Decision, error) {
	username := p("username")
	if p("vhost") != h.cfg.VHost || p("name") != h.cfg.Exchange {
		return h.a.Refuse(username, devices.RefusedResource), nil
	}
	topic := TopicOf(p("routing_key"))
	switch p("permission") {
	case "write":
		return h.a.MayPublish(ctx, username, topic)
	case "read":
		return h.a.MaySubscribe(ctx, username, topic)
	}
	return h.a.Refuse(username, devices.RefusedResource), nil
}

// TopicOf is the MQTT topic (or filter) of a routing key as the MQTT
// plugin maps them: . separates levels, * is a one-level wildcard. Device
// and namespace names hold no dots, so the device a topic names is the
// same either way.
func TopicOf(routingKey string) string {
	return strings.NewReplacer(".", "/", "*", "+").Replace(routingKey)
}
