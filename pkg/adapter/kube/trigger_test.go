package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

var cfg = TriggerConfig{Image: "ghcr.io/sless-dev/sless@sha256:abc", InvokeURL: "http://sless-api.sless-system.svc/"}

func fn() *slessv1alpha1.Function {
	return &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: "tenant-a"},
		Spec:       slessv1alpha1.FunctionSpec{TimeoutSeconds: ptr.To[int32](45)},
	}
}

func cronTrigger(mut ...func(*slessv1alpha1.Trigger)) *slessv1alpha1.Trigger {
	t := &slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "tenant-a", UID: "uid-7"},
		Spec:       slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "0 3 * * *"},
	}
	for _, m := range mut {
		m(t)
	}
	return t
}

func owner() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "sless.dev/v1alpha1", Kind: "Trigger", Name: "nightly", UID: "uid-7", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}

func callerContainer(name string, args []string, env []corev1.EnvVar) corev1.Container {
	return corev1.Container{
		Name: name, Image: cfg.Image, Args: args, Env: env,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

func podSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

var tokenEnvVar = corev1.EnvVar{Name: "SLESS_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
	LocalObjectReference: corev1.LocalObjectReference{Name: "nightly-trigger-token"}, Key: "token"}}}

func TestMakeCronJob(t *testing.T) {
	labels := map[string]string{"sless.dev/trigger": "nightly", "sless.dev/function": "report", "app.kubernetes.io/component": "trigger-cron", "app.kubernetes.io/managed-by": "sless"}
	want := func(mut func(*batchv1.CronJob)) *batchv1.CronJob {
		cj := &batchv1.CronJob{
			ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "tenant-a", Labels: labels, OwnerReferences: owner()},
			Spec: batchv1.CronJobSpec{
				Schedule: "0 3 * * *", TimeZone: ptr.To("Etc/UTC"), StartingDeadlineSeconds: ptr.To[int64](300),
				ConcurrencyPolicy: batchv1.ForbidConcurrent, Suspend: ptr.To(false),
				SuccessfulJobsHistoryLimit: ptr.To[int32](3), FailedJobsHistoryLimit: ptr.To[int32](3),
				JobTemplate: batchv1.JobTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: batchv1.JobSpec{
						BackoffLimit: ptr.To[int32](0), ActiveDeadlineSeconds: ptr.To[int64](45 + 120 + 60),
						Template: corev1.PodTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{Labels: labels},
							Spec: corev1.PodSpec{
								RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](5),
								AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false), SecurityContext: podSecurity(),
								Containers: []corev1.Container{callerContainer("invoke",
									[]string{"cron-call", "--url=http://sless-api.sless-system.svc/fn/tenant-a/report", "--trigger=cron", "--timeout=105s"},
									[]corev1.EnvVar{tokenEnvVar})},
							},
						},
					},
				},
			},
		}
		if mut != nil {
			mut(cj)
		}
		return cj
	}
	container := func(cj *batchv1.CronJob) *corev1.Container {
		return &cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	}
	for _, tc := range []struct {
		name string
		in   *slessv1alpha1.Trigger
		want *batchv1.CronJob
	}{
		{"defaults: UTC, Forbid, 300 s deadline, no payload", cronTrigger(), want(nil)},
		{"time zone, policy, deadline, payload compacted",
			cronTrigger(func(t *slessv1alpha1.Trigger) {
				t.Spec.TimeZone = "Europe/Berlin"
				t.Spec.ConcurrencyPolicy = slessv1alpha1.ConcurrencyAllow
				t.Spec.StartingDeadlineSeconds = ptr.To[int64](30)
				t.Spec.Payload = &apiextensionsv1.JSON{Raw: []byte("{ \"a\" : [1, 2] }")}
			}),
			want(func(cj *batchv1.CronJob) {
				cj.Spec.TimeZone = ptr.To("Europe/Berlin")
				cj.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent
				cj.Spec.StartingDeadlineSeconds = ptr.To[int64](30)
				c := container(cj)
				c.Env = append(c.Env, corev1.EnvVar{Name: "SLESS_PAYLOAD", Value: `{"a":[1,2]}`})
			})},
		{"null payload sends no body", cronTrigger(func(t *slessv1alpha1.Trigger) { t.Spec.Payload = &apiextensionsv1.JSON{Raw: []byte("null")} }), want(nil)},
		{"disabled: suspended", cronTrigger(func(t *slessv1alpha1.Trigger) { t.Spec.Enabled = ptr.To(false) }),
			want(func(cj *batchv1.CronJob) { cj.Spec.Suspend = ptr.To(true) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, MakeCronJob(tc.in, fn(), cfg)); d != "" {
				t.Errorf("MakeCronJob (-want +got):\n%s", d)
			}
		})
	}
}

func TestMakeConsumerDeployment(t *testing.T) {
	labels := map[string]string{"sless.dev/trigger": "nightly", "sless.dev/function": "report", "app.kubernetes.io/component": "trigger-consumer", "app.kubernetes.io/managed-by": "sless"}
	queueTrigger := func(enabled bool, q slessv1alpha1.QueueSpec) *slessv1alpha1.Trigger {
		return &slessv1alpha1.Trigger{
			ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "tenant-a", UID: "uid-7"},
			Spec:       slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeQueue, Enabled: ptr.To(enabled), Queue: &q},
		}
	}
	want := func(replicas int32, args []string) *appsv1.Deployment {
		env := []corev1.EnvVar{{Name: "SLESS_AMQP_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "rabbit"}, Key: "url"}}}, tokenEnvVar}
		c := callerContainer("consume", args, env)
		c.Ports = []corev1.ContainerPort{{Name: "health", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
		// Ready only while connected and consuming; live while the
		// process answers, so a broker outage restarts nothing.
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("health")}},
			PeriodSeconds: 5, TimeoutSeconds: 2, SuccessThreshold: 1, FailureThreshold: 2}
		c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}},
			PeriodSeconds: 10, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "nightly-consumer", Namespace: "tenant-a", Labels: labels, OwnerReferences: owner()},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(replicas), RevisionHistoryLimit: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"sless.dev/trigger": "nightly", "app.kubernetes.io/component": "trigger-consumer"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						TerminationGracePeriodSeconds: ptr.To[int64](45 + 60 + 30),
						AutomountServiceAccountToken:  ptr.To(false), EnableServiceLinks: ptr.To(false), SecurityContext: podSecurity(),
						Containers: []corev1.Container{c},
					},
				},
			},
		}
	}
	url := "--url=http://sless-api.sless-system.svc/fn/tenant-a/report"
	for _, tc := range []struct {
		name string
		in   *slessv1alpha1.Trigger
		want *appsv1.Deployment
	}{
		{"CRD defaults applied when built from Go", queueTrigger(true, slessv1alpha1.QueueSpec{ConnectionSecret: "rabbit", Queue: "orders"}),
			want(1, []string{"consume", url, "--queue=orders", "--dead-letter-queue=orders.dlq", "--prefetch=10", "--concurrency=1", "--max-retries=3", "--backoff=1s", "--timeout=105s", "--health-addr=:8080"})},
		{"everything set, disabled", queueTrigger(false, slessv1alpha1.QueueSpec{ConnectionSecret: "rabbit", Queue: "orders", DeadLetterQueue: "dead", Delivery: slessv1alpha1.Delivery{Prefetch: ptr.To[int32](50), Concurrency: ptr.To[int32](8), MaxRetries: ptr.To[int32](0), BackoffSeconds: ptr.To[int32](30)}}),
			want(0, []string{"consume", url, "--queue=orders", "--dead-letter-queue=dead", "--prefetch=50", "--concurrency=8", "--max-retries=0", "--backoff=30s", "--timeout=105s", "--health-addr=:8080"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in.DeepCopy()
			if d := cmp.Diff(tc.want, MakeConsumerDeployment(tc.in, fn(), cfg)); d != "" {
				t.Errorf("MakeConsumerDeployment (-want +got):\n%s", d)
			}
			if d := cmp.Diff(in, tc.in); d != "" {
				t.Errorf("the builder changed its input:\n%s", d)
			}
		})
	}
	// The controller's tracing variables follow the consumer's own.
	withEnv := cfg
	withEnv.ConsumerEnv = []corev1.EnvVar{{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://collector:4318"}}
	got := MakeConsumerDeployment(queueTrigger(true, slessv1alpha1.QueueSpec{ConnectionSecret: "rabbit", Queue: "orders"}), fn(), withEnv)
	env := got.Spec.Template.Spec.Containers[0].Env
	if last := env[len(env)-1]; last != withEnv.ConsumerEnv[0] || env[len(env)-2].Name != tokenEnvVar.Name {
		t.Errorf("env %+v, want the token's then the tracing variables", env)
	}
}

func TestMakeTokenSecret(t *testing.T) {
	exp := metav1.Date(2027, 3, 1, 12, 0, 0, 0, mustLoc(t, "Europe/Berlin"))
	got := MakeTokenSecret(cronTrigger(), "tok", exp)
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "nightly-trigger-token", Namespace: "tenant-a", OwnerReferences: owner(),
			Labels:      map[string]string{"sless.dev/trigger": "nightly", "sless.dev/function": "report", "app.kubernetes.io/component": "trigger-token", "app.kubernetes.io/managed-by": "sless"},
			Annotations: map[string]string{"sless.dev/token-expires": "2027-03-01T11:00:00Z", "sless.dev/token-trigger-type": "cron"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"token": []byte("tok")},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("MakeTokenSecret (-want +got):\n%s", d)
	}
}

func TestFunctionURL(t *testing.T) {
	for base, want := range map[string]string{
		"http://proxy":        "http://proxy/fn/ns/f",
		"http://proxy/":       "http://proxy/fn/ns/f",
		"https://x.example//": "https://x.example/fn/ns/f",
		"http://gw/sless":     "http://gw/sless/fn/ns/f",
	} {
		if got := FunctionURL(base, "ns", "f"); got != want {
			t.Errorf("FunctionURL(%q) = %q, want %q", base, got, want)
		}
	}
}

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// An mqtt trigger's consumer Deployment is a queue trigger's but for what
// sless consume is told, where the connection comes from, and its
// rollout: recreated, since two pods would share one MQTT session.
func TestMakeConsumerDeploymentMQTT(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "nightly", Namespace: "tenant-a", UID: "uid-7"}
	queued := MakeConsumerDeployment(&slessv1alpha1.Trigger{ObjectMeta: meta, Spec: slessv1alpha1.TriggerSpec{
		Function: "report", Type: slessv1alpha1.TriggerTypeQueue, Queue: &slessv1alpha1.QueueSpec{ConnectionSecret: "mqtt", Queue: "q"}}}, fn(), cfg)
	in := &slessv1alpha1.Trigger{ObjectMeta: meta, Spec: slessv1alpha1.TriggerSpec{
		Function: "report", Type: slessv1alpha1.TriggerTypeMQTT, MQTT: &slessv1alpha1.MQTTSpec{ConnectionSecret: "mqtt", Topic: "sensors/#", ShareGroup: "g"}}}
	want := queued.DeepCopy()
	want.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	c := &want.Spec.Template.Spec.Containers[0]
	c.Args = []string{"consume", "--url=http://sless-api.sless-system.svc/fn/tenant-a/report", "--broker=mqtt", "--topic=sensors/#",
		"--client-id=sless-tenant-a-nightly", "--dead-letter-topic=sless/dlq/tenant-a/nightly", "--share-group=g",
		"--prefetch=10", "--concurrency=1", "--max-retries=3", "--backoff=1s", "--timeout=105s", "--health-addr=:8080"}
	c.Env = append(brokerEnv("mqtt"), tokenEnvVar)
	if d := cmp.Diff(want, MakeConsumerDeployment(in, fn(), cfg)); d != "" {
		t.Errorf("MakeConsumerDeployment (-want +got):\n%s", d)
	}
	if got := brokerEnv("mqtt"); len(got) != 1+len(BrokerAuthKeys) || got[0].ValueFrom.SecretKeyRef.Optional != nil || !*got[1].ValueFrom.SecretKeyRef.Optional {
		t.Errorf("broker env %+v: url required, the rest optional", got)
	}
}
