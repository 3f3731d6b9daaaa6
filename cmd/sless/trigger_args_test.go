package main

import (
	appsv1 "k8s.io/api/apps/v1"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/queue"
)

// The reconciler writes the command lines and environment of `sless cron-call`
// and `sless consume`; these tests hold the builders and the commands to one
// another, so a renamed flag fails here and not in a cluster.
func containerEnv(c corev1.Container, secrets map[string]string) func(string) string {
	return func(name string) string {
		for _, e := range c.Env {
			if e.Name != name {
				continue
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return secrets[e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key]
			}
			return e.Value
		}
		return ""
	}
}

func TestCronJobRunsSlessCronCall(t *testing.T) {
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: "ns"}, Spec: slessv1alpha1.FunctionSpec{TimeoutSeconds: ptr.To[int32](30)}}
	tr := &slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns"},
		Spec: slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@daily",
			Payload: &apiextensionsv1.JSON{Raw: []byte(`{"a": 1}`)}},
	}
	cj := kube.MakeCronJob(tr, fn, kube.TriggerConfig{Image: "sless", InvokeURL: "http://sless-api.sless-system.svc"})
	c := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	if c.Args[0] != "cron-call" || commands["cron-call"].run == nil {
		t.Fatalf("the CronJob runs %q, not a registered sless cron-call", c.Args[0])
	}
	o, err := parseInvoke(c.Args[1:], containerEnv(c, map[string]string{"nightly-trigger-token/token": "tok"}))
	if err != nil {
		t.Fatalf("sless cron-call refuses the CronJob's command line: %v", err)
	}
	if o.invoker.URL != "http://sless-api.sless-system.svc/fn/ns/report" || o.trigger != "cron" || o.invoker.Token != "tok" ||
		string(o.payload) != `{"a":1}` || o.invoker.Timeout != 90*time.Second {
		t.Errorf("sless cron-call would run with %+v", o)
	}
}

func TestDeploymentRunsSlessConsume(t *testing.T) {
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "ns"}}
	tr := &slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "ns"},
		Spec: slessv1alpha1.TriggerSpec{Function: "worker", Type: slessv1alpha1.TriggerTypeQueue,
			Queue: &slessv1alpha1.QueueSpec{ConnectionSecret: "rabbit", Queue: "orders", Delivery: slessv1alpha1.Delivery{MaxRetries: ptr.To[int32](7), BackoffSeconds: ptr.To[int32](3), Concurrency: ptr.To[int32](4)}}},
	}
	d := kube.MakeConsumerDeployment(tr, fn, kube.TriggerConfig{Image: "sless", InvokeURL: "http://proxy"})
	c := d.Spec.Template.Spec.Containers[0]
	if c.Args[0] != "consume" || commands["consume"].run == nil {
		t.Fatalf("the Deployment runs %q, not a registered sless consume", c.Args[0])
	}
	o, err := parseConsume(c.Args[1:], containerEnv(c, map[string]string{"rabbit/url": "amqp://u:p@rabbit/", "orders-trigger-token/token": "tok"}))
	if err != nil {
		t.Fatalf("sless consume refuses the Deployment's command line: %v", err)
	}
	cfg := o.queue
	// The probes ask the port and paths sless consume serves.
	_, port, _ := net.SplitHostPort(o.healthAddr)
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Fatalf("consumer probes: readiness %+v, liveness %+v", c.ReadinessProbe, c.LivenessProbe)
		}
		named := ""
		for _, cp := range c.Ports {
			if cp.Name == p.HTTPGet.Port.String() {
				named = strconv.Itoa(int(cp.ContainerPort))
			}
		}
		if named != port {
			t.Errorf("a probe asks port %s (%s), sless consume serves on %q", p.HTTPGet.Port.String(), named, o.healthAddr)
		}
	}
	if c.ReadinessProbe.HTTPGet.Path != kube.ConsumerReadyPath || c.LivenessProbe.HTTPGet.Path != kube.ConsumerLivePath {
		t.Errorf("probe paths %s and %s", c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path)
	}
	iv, _ := cfg.Invoker.(*queue.Invoker)
	if iv == nil {
		t.Fatalf("sless consume's invoker is %T, want *queue.Invoker", cfg.Invoker)
	}
	if cfg.URL != "amqp://u:p@rabbit/" || cfg.Queue != "orders" || cfg.DeadLetterQueue != "orders.dlq" || cfg.MaxRetries != 7 ||
		cfg.Backoff != 3*time.Second || cfg.Concurrency != 4 || cfg.Prefetch != 10 || iv.URL != "http://proxy/fn/ns/worker" ||
		iv.Token != "tok" || iv.Timeout != 90*time.Second {
		t.Errorf("sless consume would run with %+v (invoker %+v)", cfg, iv)
	}
}

// A nats trigger's Deployment runs sless consume with --broker=nats, and
// the connection Secret's keys reach it through the environment.
func TestDeploymentRunsSlessConsumeForNATS(t *testing.T) {
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "ns"}}
	tr := &slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Name: "events", Namespace: "ns"},
		Spec: slessv1alpha1.TriggerSpec{Function: "worker", Type: slessv1alpha1.TriggerTypeNATS,
			NATS: &slessv1alpha1.NATSSpec{ConnectionSecret: "nats", Stream: "EVENTS", Subject: "events.>",
				Delivery: slessv1alpha1.Delivery{MaxRetries: ptr.To[int32](5), Prefetch: ptr.To[int32](20)}}},
	}
	c := kube.MakeConsumerDeployment(tr, fn, kube.TriggerConfig{Image: "sless", InvokeURL: "http://proxy"}).Spec.Template.Spec.Containers[0]
	o, err := parseConsume(c.Args[1:], containerEnv(c, map[string]string{"nats/url": "nats://n:4222", "nats/username": "u", "nats/password": "p",
		"events-trigger-token/token": "tok"}))
	if err != nil {
		t.Fatalf("sless consume refuses the Deployment's command line: %v", err)
	}
	cfg := o.nats
	if o.broker != "nats" || cfg.URL != "nats://n:4222" || cfg.Auth.Username != "u" || cfg.Auth.Password != "p" || cfg.Stream != "EVENTS" ||
		cfg.Subject != "events.>" || cfg.Durable != "events" || cfg.DeadLetterSubject != "dlq.EVENTS.events" || cfg.MaxRetries != 5 ||
		cfg.Prefetch != 20 || cfg.AckWait != 120*time.Second {
		t.Errorf("sless consume would run with %+v", cfg)
	}
	src, err := o.source(nil, nil)
	if err != nil || src.What() != "subject events.> of stream EVENTS" {
		t.Errorf("consumer %v, %v", src, err)
	}
	for _, e := range c.Env {
		if ref := e.ValueFrom.SecretKeyRef; ref != nil && ref.Name == "nats" && ref.Key != "url" && (ref.Optional == nil || !*ref.Optional) {
			t.Errorf("%s from key %s is not optional: a Secret without it would keep the pod from starting", e.Name, ref.Key)
		}
	}
}

// A kafka trigger's Deployment runs sless consume with --broker=kafka, and
// the connection Secret's brokers and optional SASL and TLS keys reach it
// through the environment.
func TestDeploymentRunsSlessConsumeForKafka(t *testing.T) {
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "ns"}}
	tr := &slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "ns"},
		Spec: slessv1alpha1.TriggerSpec{Function: "worker", Type: slessv1alpha1.TriggerTypeKafka,
			Kafka: &slessv1alpha1.KafkaSpec{ConnectionSecret: "kafka", Topic: "orders",
				Delivery: slessv1alpha1.Delivery{MaxRetries: ptr.To[int32](5), Concurrency: ptr.To[int32](4)}}},
	}
	c := kube.MakeConsumerDeployment(tr, fn, kube.TriggerConfig{Image: "sless", InvokeURL: "http://proxy"}).Spec.Template.Spec.Containers[0]
	o, err := parseConsume(c.Args[1:], containerEnv(c, map[string]string{"kafka/brokers": "k-0:9092, k-1:9092", "kafka/sasl.mechanism": "SCRAM-SHA-256",
		"kafka/username": "u", "kafka/password": "p", "kafka/tls": "true", "orders-trigger-token/token": "tok"}))
	if err != nil {
		t.Fatalf("sless consume refuses the Deployment's command line: %v", err)
	}
	cfg := o.kafka
	if o.broker != "kafka" || strings.Join(cfg.Brokers, ",") != "k-0:9092,k-1:9092" || cfg.SASLMechanism != "SCRAM-SHA-256" || cfg.Auth.Username != "u" ||
		cfg.Auth.Password != "p" || !cfg.TLS || cfg.Topic != "orders" || cfg.Group != "sless.ns.orders" || cfg.DeadLetterTopic != "orders.dlq" ||
		cfg.MaxRetries != 5 || cfg.Concurrency != 4 || cfg.Prefetch != 10 {
		t.Errorf("sless consume would run with %+v", cfg)
	}
	src, err := o.source(nil, nil)
	if err != nil || src.What() != "topic orders" {
		t.Errorf("consumer %v, %v", src, err)
	}
	for _, e := range c.Env {
		if ref := e.ValueFrom.SecretKeyRef; ref != nil && ref.Name == "kafka" && ref.Key != "brokers" && (ref.Optional == nil || !*ref.Optional) {
			t.Errorf("%s from key %s is not optional: a Secret without it would keep the pod from starting", e.Name, ref.Key)
		}
	}
}

// An mqtt trigger's Deployment runs sless consume with --broker=mqtt, the
// client id and dead-letter topic the trigger names, and is recreated
// rather than rolled: two pods would take one session from each other.
func TestDeploymentRunsSlessConsumeForMQTT(t *testing.T) {
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "ns"}}
	tr := &slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Name: "temps", Namespace: "ns"},
		Spec: slessv1alpha1.TriggerSpec{Function: "worker", Type: slessv1alpha1.TriggerTypeMQTT,
			MQTT: &slessv1alpha1.MQTTSpec{ConnectionSecret: "mqtt", Topic: "sensors/+/temp", ShareGroup: "workers",
				Delivery: slessv1alpha1.Delivery{MaxRetries: ptr.To[int32](5), Concurrency: ptr.To[int32](4)}}},
	}
	d := kube.MakeConsumerDeployment(tr, fn, kube.TriggerConfig{Image: "sless", InvokeURL: "http://proxy"})
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %+v, want Recreate", d.Spec.Strategy)
	}
	c := d.Spec.Template.Spec.Containers[0]
	o, err := parseConsume(c.Args[1:], containerEnv(c, map[string]string{"mqtt/url": "ssl://m:8883", "mqtt/username": "u", "mqtt/password": "p",
		"temps-trigger-token/token": "tok"}))
	if err != nil {
		t.Fatalf("sless consume refuses the Deployment's command line: %v", err)
	}
	cfg := o.mqtt
	if o.broker != "mqtt" || cfg.URL != "ssl://m:8883" || cfg.Auth.Username != "u" || cfg.Auth.Password != "p" || cfg.Topic != "sensors/+/temp" ||
		cfg.ShareGroup != "workers" || cfg.ClientID != "sless-ns-temps" || cfg.DeadLetterTopic != "sless/dlq/ns/temps" || cfg.MaxRetries != 5 ||
		cfg.Concurrency != 4 || cfg.Prefetch != 10 {
		t.Errorf("sless consume would run with %+v", cfg)
	}
	src, err := o.source(nil, nil)
	if err != nil || src.What() != "topic sensors/+/temp in share group workers" {
		t.Errorf("consumer %v, %v", src, err)
	}
	for _, e := range c.Env {
		if ref := e.ValueFrom.SecretKeyRef; ref != nil && ref.Name == "mqtt" && ref.Key != "url" && (ref.Optional == nil || !*ref.Optional) {
			t.Errorf("%s from key %s is not optional: a Secret without it would keep the pod from starting", e.Name, ref.Key)
		}
	}
}
