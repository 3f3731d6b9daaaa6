package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/pkg/adapter/postgres/postgrestest"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth/triggertoken"
	"github.com/sless-dev/sless/pkg/frontdoor"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/test/testbed"
)

// TestInvokeRecordsACronRow runs `sless cron-call` as a cron run's container
// does, against a running invoke proxy (behind the trigger credential check)
// recording into a real PostgreSQL, and finds the run recorded as cron.
func TestInvokeRecordsACronRow(t *testing.T) {
	ctx := context.Background()
	kube := testbed.SharedKube(t)
	ns := kube.Namespace(t)

	// The function: a local HTTP server that echoes what it got.
	var mu sync.Mutex
	var got []map[string]any
	fnSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, map[string]any{"body": string(b), "path": r.URL.Path, "auth": r.Header.Get("Authorization"), "ct": r.Header.Get("Content-Type")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"rows": 42}`))
	}))
	defer fnSrv.Close()
	fnAddr, _ := url.Parse(fnSrv.URL)

	// The invoke path: proxy, recorder, PostgreSQL.
	pg := postgrestest.New(t)
	rec := invoke.NewRecorder(pg, invoke.RecorderOptions{})
	proxy, err := invoke.NewProxy(invoke.Options{
		Resolver: invoke.ResolverFunc(func(_ context.Context, namespace, name string) (invoke.Target, error) {
			if namespace != ns || name != "report" {
				return invoke.Target{}, invoke.ErrNotFound
			}
			// Private: no http trigger. Only the trigger credential gets in.
			return invoke.Target{Address: fnAddr, Ready: true, Revision: "report-00001", Timeout: 30 * time.Second}, nil
		}),
		Recorder: rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	toks := &triggertoken.HS256{Secret: []byte("0123456789abcdef0123456789abcdef-invoke-test")}
	srv := httptest.NewServer(&frontdoor.TriggerCallHandler{Proxy: proxy, Tokens: toks, Triggers: kube.Client})
	defer srv.Close()

	// The trigger and its credential, as the reconciler issues it.
	tr := &slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns},
		Spec:       slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@daily"},
	}
	if err := kube.Client.Create(ctx, tr); err != nil {
		t.Fatal(err)
	}
	token, _, err := toks.IssueTriggerToken(tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLESS_TOKEN", token)
	t.Setenv("SLESS_PAYLOAD", `{"kind": "daily"}`)
	fnURL := srv.URL + "/fn/" + ns + "/report"
	if err := runCronCall(ctx, []string{"--url=" + fnURL, "--trigger=cron", "--timeout=20s"}); err != nil {
		t.Fatalf("sless cron-call: %v", err)
	}
	mu.Lock()
	if len(got) != 1 || got[0]["body"] != `{"kind": "daily"}` || got[0]["path"] != "/" || got[0]["auth"] != "" || got[0]["ct"] != "application/json" {
		t.Errorf("the function got %v (want the payload at /, without the credential)", got)
	}
	mu.Unlock()

	// Refused: a queue call with the cron credential, another function, a
	// forged token. None reaches the function or leaves a row.
	for _, tc := range []struct {
		name string
		args []string
		tok  string
	}{
		{"wrong trigger type", []string{"--url=" + fnURL, "--trigger=queue", "--timeout=5s"}, token},
		{"other function", []string{"--url=" + srv.URL + "/fn/" + ns + "/other", "--trigger=cron", "--timeout=5s"}, token},
		{"forged", []string{"--url=" + fnURL, "--trigger=cron", "--timeout=5s"}, token[:len(token)-4] + "AAAA"},
	} {
		t.Setenv("SLESS_TOKEN", tc.tok)
		if err := runCronCall(ctx, tc.args); err == nil || !strings.Contains(err.Error(), "answered HTTP 40") {
			t.Errorf("%s: sless cron-call error %v, want a 401/403 answer", tc.name, err)
		}
	}
	// Two Authorization headers, the first the good credential: refused,
	// as pkg/auth refuses them for callers, not the first taken.
	twice, err := http.NewRequest(http.MethodPost, fnURL, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	twice.Header.Set(queue.TriggerHeader, "cron")
	twice.Header.Add("Authorization", "Bearer "+token)
	twice.Header.Add("Authorization", "Bearer not-a-credential")
	if res, err := http.DefaultClient.Do(twice); err != nil {
		t.Fatal(err)
	} else if res.Body.Close(); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("two Authorization headers: HTTP %d, want 401", res.StatusCode)
	}
	// Disabled: the credential stops working (after the lookup cache's TTL).
	tr.Spec.Enabled = ptr.To(false)
	if err := kube.Client.Update(ctx, tr); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLESS_TOKEN", token)
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := runCronCall(ctx, []string{"--url=" + fnURL, "--trigger=cron", "--timeout=5s"})
		if err != nil && strings.Contains(err.Error(), "HTTP 403") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a disabled trigger's credential still works: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	mu.Lock()
	calls := len(got)
	mu.Unlock()

	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := pg.Pool().Query(ctx, `SELECT namespace, function, revision, trigger, status, bytes_in FROM invocations ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var namespace, function, revision, trig string
		var status int
		var in int64
		if err := rows.Scan(&namespace, &function, &revision, &trig, &status, &in); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal([]any{namespace, function, revision, trig, status, in})
		found = append(found, string(b))
	}
	want := `["` + ns + `","report","report-00001","cron",200,17]`
	if len(found) != calls || len(found) == 0 || found[0] != want {
		t.Fatalf("invocations %v, want %d row(s) starting with %s", found, calls, want)
	}
}

func TestInvokeFlags(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	ok := map[string]string{"SLESS_TOKEN": "t"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no url", []string{"--timeout=1s"}, ok, "--url is required"},
		{"not http", []string{"--url=ftp://x/fn/a/b", "--timeout=1s"}, ok, "http:// or https://"},
		{"not a function path", []string{"--url=http://x/api/a/b", "--timeout=1s"}, ok, "/fn/{namespace}/{name}"},
		{"bad trigger", []string{"--url=http://x/fn/a/b", "--trigger=http", "--timeout=1s"}, ok, "cron or queue"},
		{"no timeout", []string{"--url=http://x/fn/a/b"}, ok, "--timeout is required"},
		{"no token", []string{"--url=http://x/fn/a/b", "--timeout=1s"}, map[string]string{}, "no credential"},
		{"bad payload", []string{"--url=http://x/fn/a/b", "--timeout=1s", "--payload={"}, ok, "not valid JSON"},
		{"bad payload env", []string{"--url=http://x/fn/a/b", "--timeout=1s"}, map[string]string{"SLESS_TOKEN": "t", "SLESS_PAYLOAD": "nope"}, "not valid JSON"},
		{"stray argument", []string{"--url=http://x/fn/a/b", "--timeout=1s", "extra"}, ok, "unexpected arguments"},
		{"unknown flag", []string{"--bogus"}, ok, "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseInvoke(tc.args, env(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	o, err := parseInvoke([]string{"--url=https://proxy/fn/a/b", "--timeout=90s"}, env(map[string]string{"SLESS_TOKEN": "t", "SLESS_PAYLOAD": `{"a":1}`}))
	if err != nil || o.trigger != "cron" || string(o.payload) != `{"a":1}` || o.invoker.Timeout != 90*time.Second || o.invoker.Token != "t" {
		t.Fatalf("good flags: %+v %v", o, err)
	}
}

func TestConsumeFlags(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	ok := map[string]string{"SLESS_TOKEN": "t", "SLESS_AMQP_URL": "amqp://u:p@rabbit:5672/"}
	base := []string{"--url=http://proxy/fn/a/b", "--queue=orders", "--timeout=90s"}
	for _, tc := range []struct {
		name  string
		extra []string
		env   map[string]string
		want  string
	}{
		{"no broker", nil, map[string]string{"SLESS_TOKEN": "t"}, "SLESS_AMQP_URL"},
		{"no token", nil, map[string]string{"SLESS_AMQP_URL": "amqp://x"}, "SLESS_TOKEN"},
		{"prefetch 0", []string{"--prefetch=0"}, ok, "--prefetch must be between 1 and 1000"},
		{"concurrency 101", []string{"--concurrency=101"}, ok, "--concurrency must be between 1 and 100"},
		{"negative retries", []string{"--max-retries=-1"}, ok, "--max-retries must be between 0 and 100"},
		{"zero backoff", []string{"--backoff=0s"}, ok, "--backoff must be positive"},
		{"backoff above max", []string{"--backoff=2h", "--max-backoff=1h"}, ok, "at most --max-backoff"},
		{"bad url", []string{"--url=proxy"}, ok, "http:// or https://"},
		{"health address without a port", []string{"--health-addr=8080"}, ok, "--health-addr must be host:port or :port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConsume(append(append([]string{}, base...), tc.extra...), env(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := parseConsume([]string{"--timeout=1s"}, env(ok)); err == nil || !strings.Contains(err.Error(), "--queue is required") {
		t.Errorf("no queue: %v", err)
	}
	o, err := parseConsume(append(base, "--max-retries=5", "--backoff=2s", "--health-addr=:8080"), env(ok))
	cfg := o.queue
	iv, _ := cfg.Invoker.(*queue.Invoker)
	if err != nil || cfg.URL != ok["SLESS_AMQP_URL"] || cfg.Queue != "orders" || cfg.MaxRetries != 5 || cfg.Backoff != 2*time.Second || iv == nil || iv.Token != "t" {
		t.Fatalf("good flags: %+v %v", cfg, err)
	}
	if o.healthAddr != ":8080" {
		t.Errorf("health address %q, want :8080", o.healthAddr)
	}
	natsEnv := map[string]string{"SLESS_TOKEN": "t", "SLESS_BROKER_URL": "nats://n:4222"}
	natsBase := []string{"--broker=nats", "--url=http://proxy/fn/a/b", "--timeout=90s", "--stream=S", "--subject=s.>", "--durable=d", "--dead-letter-subject=dead"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown broker", []string{"--broker=pulsar", "--url=http://proxy/fn/a/b", "--timeout=1s"}, natsEnv, "--broker must be amqp, nats, kafka or mqtt"},
		{"no server", natsBase, map[string]string{"SLESS_TOKEN": "t"}, "SLESS_BROKER_URL"},
		{"no stream", append(append([]string{}, natsBase...), "--stream="), natsEnv, "--stream is required with --broker=nats"},
		{"no dead-letter subject", append(append([]string{}, natsBase...), "--dead-letter-subject="), natsEnv, "--dead-letter-subject is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseConsume(tc.args, env(tc.env)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if o, err := parseConsume(natsBase, env(natsEnv)); err != nil || o.broker != "nats" || o.nats.AckWait != 120*time.Second {
		t.Fatalf("nats flags: %+v %v", o.nats, err)
	}
}

func TestConsumeFlagsForKafka(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{"SLESS_TOKEN": "t", "SLESS_KAFKA_BROKERS": "k-0:9092,k-1:9092"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	base := []string{"--broker=kafka", "--url=http://proxy/fn/a/b", "--timeout=90s", "--topic=orders", "--group=g", "--dead-letter-topic=orders.dlq"}
	but := func(flags ...string) []string { return append(append([]string{}, base...), flags...) }
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no brokers", base, map[string]string{"SLESS_TOKEN": "t"}, "$SLESS_KAFKA_BROKERS (the seed brokers): no broker given"},
		{"broker without port", base, with(map[string]string{"SLESS_KAFKA_BROKERS": "k-0"}), `broker "k-0" is not host:port`},
		{"no topic", but("--topic="), with(nil), "--topic is required with --broker=kafka"},
		{"no group", but("--group="), with(nil), "--group is required with --broker=kafka"},
		{"no dead-letter topic", but("--dead-letter-topic="), with(nil), "--dead-letter-topic is required with --broker=kafka"},
		{"tls not a boolean", base, with(map[string]string{"SLESS_BROKER_TLS": "yes"}), `$SLESS_BROKER_TLS (key tls) must be true or false, got "yes"`},
		{"no token", base, map[string]string{"SLESS_KAFKA_BROKERS": "k:9092"}, "SLESS_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseConsume(tc.args, env(tc.env)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// What the consumer refuses (a topic Kafka would not take, an unknown
	// SASL mechanism) comes from kafkaq.New, as for the other brokers.
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"topic with a slash", but("--topic=a/b"), with(nil), "topic must be letters, digits"},
		{"unknown mechanism", base, with(map[string]string{"SLESS_BROKER_SASL_MECHANISM": "GSSAPI", "SLESS_BROKER_USERNAME": "u", "SLESS_BROKER_PASSWORD": "p"}), `SASL mechanism "GSSAPI"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseConsume(tc.args, env(tc.env))
			if err == nil {
				_, err = o.source(nil, nil)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	o, err := parseConsume(base, env(with(map[string]string{"SLESS_BROKER_TLS": "TRUE", "SLESS_BROKER_SASL_MECHANISM": "SCRAM-SHA-512",
		"SLESS_BROKER_USERNAME": "u", "SLESS_BROKER_PASSWORD": "p"})))
	cfg := o.kafka
	if err != nil || o.broker != "kafka" || strings.Join(cfg.Brokers, ",") != "k-0:9092,k-1:9092" || !cfg.TLS || cfg.SASLMechanism != "SCRAM-SHA-512" ||
		cfg.Auth.Username != "u" || cfg.Topic != "orders" || cfg.Group != "g" || cfg.DeadLetterTopic != "orders.dlq" {
		t.Fatalf("kafka flags: %+v %v", cfg, err)
	}
}

func TestParseConsumeMQTT(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	mqttEnv := map[string]string{"SLESS_TOKEN": "t", "SLESS_BROKER_URL": "tcp://m:1883", "SLESS_BROKER_USERNAME": "u", "SLESS_BROKER_PASSWORD": "p"}
	base := []string{"--broker=mqtt", "--url=http://proxy/fn/a/b", "--timeout=90s", "--topic=sensors/+/temp", "--client-id=c1", "--dead-letter-topic=dead"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no broker URL", base, map[string]string{"SLESS_TOKEN": "t"}, "$SLESS_BROKER_URL (the broker's tcp:// or ssl:// URL) is required"},
		{"no topic", with("--topic="), mqttEnv, "--topic is required with --broker=mqtt"},
		{"no client id", with("--client-id="), mqttEnv, "--client-id is required with --broker=mqtt"},
		{"no dead-letter topic", with("--dead-letter-topic="), mqttEnv, "--dead-letter-topic is required with --broker=mqtt"},
		{"no token", base, map[string]string{"SLESS_BROKER_URL": "tcp://m:1883"}, "$SLESS_TOKEN"},
		{"bad prefetch", with("--prefetch=0"), mqttEnv, "--prefetch must be between 1 and 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseConsume(tc.args, env(tc.env)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	o, err := parseConsume(with("--share-group=g", "--concurrency=3"), env(mqttEnv))
	if err != nil {
		t.Fatal(err)
	}
	c := o.mqtt
	if o.broker != "mqtt" || c.URL != "tcp://m:1883" || c.Auth.Username != "u" || c.Auth.Password != "p" || c.Topic != "sensors/+/temp" ||
		c.ShareGroup != "g" || c.ClientID != "c1" || c.DeadLetterTopic != "dead" || c.Concurrency != 3 || c.Invoker == nil {
		t.Errorf("mqtt flags: %+v", c)
	}
	// What the flags cannot check, the consumer refuses when it is made.
	bad, err := parseConsume(with("--topic=a/#/b"), env(mqttEnv))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.source(nil, nil); err == nil || !strings.Contains(err.Error(), "# only as the whole last level") {
		t.Errorf("a bad filter: %v", err)
	}
}
