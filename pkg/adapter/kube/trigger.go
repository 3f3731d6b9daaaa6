package kube

import (
	"bytes"
	"encoding/json"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
)

// MakeCronJob, MakeConsumerDeployment and MakeTokenSecret build the objects
// Carrier owns for a trigger: the CronJob of a cron trigger, the consumer
// Deployment of a queue trigger and the Secret holding a trigger's
// credential. They are pure: no client, no clock, the same object for the
// same input. Every object made for a trigger carries LabelTrigger,
// LabelFunction, LabelComponent and LabelManagedBy.
const (
	LabelTrigger   = "sless.dev/trigger"
	LabelComponent = "app.kubernetes.io/component"
)

// Environment of the `sless cron-call` and `sless consume` containers. The
// credential comes from the trigger's token Secret, the AMQP URL from the
// user's connection Secret; neither is written into the pod spec.
const (
	EnvToken   = "SLESS_TOKEN"
	EnvPayload = "SLESS_PAYLOAD"
	EnvAMQPURL = "SLESS_AMQP_URL"
	// EnvBrokerURL is the URL of a nats or mqtt trigger's broker, from the
	// connection Secret's "url"; the EnvBroker* below come from its
	// optional keys (BrokerAuthKeys).
	EnvBrokerURL      = "SLESS_BROKER_URL"
	EnvBrokerUsername = "SLESS_BROKER_USERNAME"
	EnvBrokerPassword = "SLESS_BROKER_PASSWORD"
	EnvBrokerToken    = "SLESS_BROKER_TOKEN"
	EnvBrokerCA       = "SLESS_BROKER_CA"
	EnvBrokerCert     = "SLESS_BROKER_CERT"
	EnvBrokerKey      = "SLESS_BROKER_KEY"
	// EnvKafkaBrokers is a kafka trigger's seed brokers, from the
	// connection Secret's "brokers"; EnvBrokerSASLMechanism and
	// EnvBrokerTLS come from its keys "sasl.mechanism" and "tls".
	EnvKafkaBrokers        = "SLESS_KAFKA_BROKERS"
	EnvBrokerSASLMechanism = "SLESS_BROKER_SASL_MECHANISM"
	EnvBrokerTLS           = "SLESS_BROKER_TLS"

	// TokenKey is the key of the token in the trigger's Secret; the
	// connection Secret of a queue trigger holds its URL under ConnectionURLKey.
	TokenKey         = "token"
	ConnectionURLKey = "url"
	// KafkaBrokersKey holds a kafka trigger's seed brokers.
	KafkaBrokersKey = "brokers"
)

// Defaults of the cron CronJob.
const (
	SuccessfulJobsHistoryLimit = 3
	FailedJobsHistoryLimit     = 3
	// CallerStartupAllowanceSeconds is added to the function's timeout for the
	// caller: a run may wait for a cold start (image pull, scale from zero)
	// before the function's own budget begins.
	CallerStartupAllowanceSeconds = 60
	// UnreachableAllowanceSeconds is how long a cron run waits for the
	// invoke proxy to accept its connection (sless-api rolled out or
	// rescheduled at the scheduled time); the Job's deadline leaves room
	// for it.
	UnreachableAllowanceSeconds = 60
	// DrainAllowanceSeconds is added to the function's timeout for a
	// consumer's termination grace, so deliveries in flight finish.
	DrainAllowanceSeconds = 30
)

// The consumer's health endpoint: `sless consume --health-addr` serves
// ConsumerReadyPath (200 while connected to the broker and consuming) and
// ConsumerLivePath (200 while the process serves) on ConsumerHealthPort.
const (
	ConsumerHealthPort     = 8080
	ConsumerHealthPortName = "health"
	ConsumerReadyPath      = "/readyz"
	ConsumerLivePath       = "/healthz"
)

// TriggerConfig is what the builders need beyond the Trigger and its Function.
type TriggerConfig struct {
	// Image is the sless image; its entrypoint is the sless binary.
	Image string
	// InvokeURL is the invoke proxy's base URL as seen from inside the
	// cluster, e.g. http://sless-api.sless-system.svc.
	InvokeURL string
	// ImagePullPolicy of the caller containers; the kubelet's default if empty.
	ImagePullPolicy corev1.PullPolicy
	// ConsumerEnv is added to the consumers' environment: the
	// controller's own OTEL_* variables, so their spans go where its go.
	ConsumerEnv []corev1.EnvVar
}

// FunctionURL is where a trigger calls its function through the invoke proxy.
func FunctionURL(base, namespace, function string) string {
	for len(base) > 0 && base[len(base)-1] == '/' {
		base = base[:len(base)-1]
	}
	return base + "/fn/" + namespace + "/" + function
}

// TriggerLabels are the labels of the objects made for t.
func TriggerLabels(t *slessv1alpha1.Trigger, component string) map[string]string {
	return map[string]string{
		LabelTrigger:   t.Name,
		LabelFunction:  t.Spec.Function,
		LabelComponent: component,
		LabelManagedBy: ManagedBy,
	}
}

func ownerRef(t *slessv1alpha1.Trigger) metav1.OwnerReference {
	return *metav1.NewControllerRef(t, slessv1alpha1.SchemeGroupVersion.WithKind("Trigger"))
}

func tokenEnv(t *slessv1alpha1.Trigger) corev1.EnvVar {
	return corev1.EnvVar{Name: EnvToken, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: names.TokenSecret(t)},
		Key:                  TokenKey,
	}}}
}

// CallerUser is the user the caller pods run as: the sless image's own
// (USER in the Dockerfile), so that runAsNonRoot holds for it.
const CallerUser = 65532

// callerPodSpec is the part the cron caller and the queue consumer share:
// the sless binary, no Kubernetes API access, not root, nothing writable.
func callerPodSpec(cfg TriggerConfig, name string, args []string, env []corev1.EnvVar) corev1.PodSpec {
	return corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To[int64](CallerUser),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name:            name,
			Image:           cfg.Image,
			ImagePullPolicy: cfg.ImagePullPolicy,
			Args:            args,
			Env:             env,
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}},
	}
}

// MakeCronJob builds the CronJob of a cron trigger. Its one container runs
// `sless cron-call`, which calls the function through the invoke proxy with the
// trigger's credential, so the run is recorded like any call (trigger=cron).
// A disabled trigger suspends the CronJob; a run is never retried by the Job
// (backoffLimit 0): a second call of a function with side effects is the
// user's decision, not the platform's.
func MakeCronJob(t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function, cfg TriggerConfig) *batchv1.CronJob {
	timeout := fn.Timeout()
	tz := t.Spec.TimeZone
	if tz == "" {
		tz = "Etc/UTC"
	}
	deadline := t.Spec.StartingDeadlineSeconds
	if deadline == nil {
		deadline = ptr.To[int64](slessv1alpha1.DefaultStartingDeadlineSeconds)
	}
	args := []string{
		"cron-call",
		"--url=" + FunctionURL(cfg.InvokeURL, t.Namespace, t.Spec.Function),
		"--trigger=" + string(slessv1alpha1.TriggerTypeCron),
		"--timeout=" + strconv.Itoa(int(timeout)+CallerStartupAllowanceSeconds) + "s",
	}
	env := []corev1.EnvVar{tokenEnv(t)}
	if p := PayloadJSON(t.Spec.Payload); p != "" {
		env = append(env, corev1.EnvVar{Name: EnvPayload, Value: p})
	}
	labels := TriggerLabels(t, "trigger-cron")
	pod := callerPodSpec(cfg, "invoke", args, env)
	pod.RestartPolicy = corev1.RestartPolicyNever
	pod.TerminationGracePeriodSeconds = ptr.To[int64](5)
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{
			Name:            names.CronJob(t),
			Namespace:       t.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{ownerRef(t)},
		},
		Spec: batchv1.CronJobSpec{
			Schedule:                   t.Spec.Schedule,
			TimeZone:                   ptr.To(tz),
			StartingDeadlineSeconds:    deadline,
			ConcurrencyPolicy:          batchv1.ConcurrencyPolicy(t.EffectiveConcurrencyPolicy()),
			Suspend:                    ptr.To(!t.IsEnabled()),
			SuccessfulJobsHistoryLimit: ptr.To[int32](SuccessfulJobsHistoryLimit),
			FailedJobsHistoryLimit:     ptr.To[int32](FailedJobsHistoryLimit),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: batchv1.JobSpec{
					BackoffLimit:          ptr.To[int32](0),
					ActiveDeadlineSeconds: ptr.To(int64(timeout) + 2*CallerStartupAllowanceSeconds + UnreachableAllowanceSeconds),
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec:       pod,
					},
				},
			},
		},
	}
}

// BrokerAuthKeys are the optional keys of a nats or mqtt trigger's connection
// Secret and the environment variables `sless consume` reads them from.
var BrokerAuthKeys = []struct{ Key, Env string }{
	{"username", EnvBrokerUsername}, {"password", EnvBrokerPassword}, {"token", EnvBrokerToken},
	{"ca.crt", EnvBrokerCA}, {"tls.crt", EnvBrokerCert}, {"tls.key", EnvBrokerKey},
}

// KafkaAuthKeys are the optional keys of a kafka trigger's connection
// Secret and the environment variables `sless consume` reads them from.
var KafkaAuthKeys = []struct{ Key, Env string }{
	{"sasl.mechanism", EnvBrokerSASLMechanism}, {"username", EnvBrokerUsername}, {"password", EnvBrokerPassword},
	{"tls", EnvBrokerTLS}, {"ca.crt", EnvBrokerCA}, {"tls.crt", EnvBrokerCert}, {"tls.key", EnvBrokerKey},
}

// ConnectionKey is the key of the trigger's connection Secret that must
// be there: the broker's address.
func ConnectionKey(t *slessv1alpha1.Trigger) string {
	if t.Spec.Type == slessv1alpha1.TriggerTypeKafka {
		return KafkaBrokersKey
	}
	return ConnectionURLKey
}

func secretEnv(name, secret, key string, optional bool) corev1.EnvVar {
	sel := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}
	if optional {
		sel.Optional = ptr.To(true)
	}
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: sel}}
}

// brokerEnv reads a nats or mqtt trigger's connection Secret: its "url",
// and its optional keys (BrokerAuthKeys).
func brokerEnv(secret string) []corev1.EnvVar {
	env := []corev1.EnvVar{secretEnv(EnvBrokerURL, secret, ConnectionURLKey, false)}
	for _, k := range BrokerAuthKeys {
		env = append(env, secretEnv(k.Env, secret, k.Key, true))
	}
	return env
}

// consumerArgs are the flags and environment of `sless consume` for what
// the (defaulted) trigger consumes.
func consumerArgs(t *slessv1alpha1.Trigger) ([]string, []corev1.EnvVar) {
	d := t.Delivery()
	delivery := []string{
		"--prefetch=" + strconv.Itoa(int(*d.Prefetch)),
		"--concurrency=" + strconv.Itoa(int(*d.Concurrency)),
		"--max-retries=" + strconv.Itoa(int(*d.MaxRetries)),
		"--backoff=" + strconv.Itoa(int(*d.BackoffSeconds)) + "s",
	}
	switch t.Spec.Type {
	case slessv1alpha1.TriggerTypeKafka:
		return kafkaConsumerArgs(t, delivery)
	case slessv1alpha1.TriggerTypeNATS:
		n := t.Spec.NATS
		return append([]string{
			"--broker=nats",
			"--stream=" + n.Stream,
			"--subject=" + n.Subject,
			"--durable=" + names.NATSDurable(t),
			"--dead-letter-subject=" + names.NATSDeadLetterSubject(t),
		}, delivery...), brokerEnv(n.ConnectionSecret)
	case slessv1alpha1.TriggerTypeMQTT:
		m := t.Spec.MQTT
		args := []string{
			"--broker=mqtt",
			"--topic=" + m.Topic,
			"--client-id=" + names.MQTTClientID(t),
			"--dead-letter-topic=" + names.MQTTDeadLetterTopic(t),
		}
		if m.ShareGroup != "" {
			args = append(args, "--share-group="+m.ShareGroup)
		}
		return append(args, delivery...), brokerEnv(m.ConnectionSecret)
	}
	q := t.Spec.Queue
	return append([]string{
		"--queue=" + q.Queue,
		"--dead-letter-queue=" + names.DeadLetterQueue(q),
	}, delivery...), []corev1.EnvVar{secretEnv(EnvAMQPURL, q.ConnectionSecret, ConnectionURLKey, false)}
}

func kafkaConsumerArgs(t *slessv1alpha1.Trigger, delivery []string) ([]string, []corev1.EnvVar) {
	k := t.Spec.Kafka
	env := []corev1.EnvVar{secretEnv(EnvKafkaBrokers, k.ConnectionSecret, KafkaBrokersKey, false)}
	for _, a := range KafkaAuthKeys {
		env = append(env, secretEnv(a.Env, k.ConnectionSecret, a.Key, true))
	}
	return append([]string{
		"--broker=kafka",
		"--topic=" + k.Topic,
		"--group=" + names.KafkaGroup(t),
		"--dead-letter-topic=" + names.KafkaDeadLetterTopic(t),
	}, delivery...), env
}

// MakeConsumerDeployment builds the Deployment that runs `sless consume` for
// a consuming trigger: one consumer process per replica, competing for
// the messages. A disabled trigger scales it to zero; messages wait.
func MakeConsumerDeployment(t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function, cfg TriggerConfig) *appsv1.Deployment {
	// The builder sees what the apiserver would store, also for a Trigger
	// built in Go without the CRD's defaults.
	def := t.DeepCopy()
	def.SetDefaults()
	timeout := fn.Timeout()
	brokerArgs, env := consumerArgs(def)
	args := append([]string{
		"consume",
		"--url=" + FunctionURL(cfg.InvokeURL, t.Namespace, t.Spec.Function),
	}, brokerArgs...)
	args = append(args,
		"--timeout="+strconv.Itoa(int(timeout)+CallerStartupAllowanceSeconds)+"s",
		"--health-addr=:"+strconv.Itoa(ConsumerHealthPort),
	)
	env = append(env, tokenEnv(t))
	env = append(env, cfg.ConsumerEnv...)
	labels := TriggerLabels(t, "trigger-consumer")
	selector := map[string]string{LabelTrigger: t.Name, LabelComponent: "trigger-consumer"}
	replicas := int32(1)
	if !t.IsEnabled() {
		replicas = 0
	}
	pod := callerPodSpec(cfg, "consume", args, env)
	// A consumer told to stop finishes the deliveries it holds: the longest
	// takes the function's timeout plus the cold-start allowance.
	pod.TerminationGracePeriodSeconds = ptr.To(int64(timeout) + CallerStartupAllowanceSeconds + DrainAllowanceSeconds)
	c := &pod.Containers[0]
	c.Ports = []corev1.ContainerPort{{Name: ConsumerHealthPortName, ContainerPort: ConsumerHealthPort, Protocol: corev1.ProtocolTCP}}
	// Ready means connected to the broker and consuming, so the
	// Deployment's available replicas, and the Trigger's Ready that reads
	// them, say whether messages are taken: a wrong broker URL or a queue
	// the consumer may not read shows as an unavailable replica within
	// about 10 s. Liveness does not follow the broker: restarting a
	// consumer cannot bring a broker back.
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: ConsumerReadyPath, Port: intstr.FromString(ConsumerHealthPortName)}},
		PeriodSeconds:    5,
		TimeoutSeconds:   2,
		SuccessThreshold: 1,
		FailureThreshold: 2,
	}
	c.LivenessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: ConsumerLivePath, Port: intstr.FromString(ConsumerHealthPortName)}},
		PeriodSeconds:    10,
		TimeoutSeconds:   5,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:            names.ConsumerDeployment(t),
			Namespace:       t.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{ownerRef(t)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas:             &replicas,
			RevisionHistoryLimit: ptr.To[int32](2),
			Selector:             &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       pod,
			},
		},
	}
	if t.Spec.Type == slessv1alpha1.TriggerTypeMQTT {
		// An mqtt consumer's client id names one session, and a broker
		// hands a session to the last client that connects with its id:
		// an old and a new pod would take it from each other in turn.
		// The old pod goes first.
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	}
	return d
}

// MakeTokenSecret builds the Secret holding the trigger's credential.
// ExpiresAnnotation records when the token expires, so Carrier can
// renew it in time without parsing it.
func MakeTokenSecret(t *slessv1alpha1.Trigger, token string, expires metav1.Time) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            names.TokenSecret(t),
			Namespace:       t.Namespace,
			Labels:          TriggerLabels(t, "trigger-token"),
			Annotations:     map[string]string{ExpiresAnnotation: expires.UTC().Format(timeFormat), TypeAnnotation: string(t.Spec.Type)},
			OwnerReferences: []metav1.OwnerReference{ownerRef(t)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{TokenKey: []byte(token)},
	}
}

// ExpiresAnnotation on a token Secret is its token's expiry, RFC 3339;
// TypeAnnotation the trigger type it was issued for (a token is good for one).
const (
	ExpiresAnnotation = "sless.dev/token-expires"
	TypeAnnotation    = "sless.dev/token-trigger-type"
)

const timeFormat = "2006-01-02T15:04:05Z07:00"

// PayloadJSON is a payload as compact JSON, "" when unset or null.
func PayloadJSON(p *apiextensionsv1.JSON) string {
	if p == nil || len(p.Raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, p.Raw); err != nil {
		// The apiserver stores only valid JSON; pass anything else on as
		// it is and let the function's wrapper answer for it.
		return string(p.Raw)
	}
	if b.String() == "null" {
		return ""
	}
	return b.String()
}
