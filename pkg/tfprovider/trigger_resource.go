package tfprovider

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
)

const triggerDeleteWait = 2 * time.Minute

var (
	_ resource.ResourceWithConfigure      = (*triggerResource)(nil)
	_ resource.ResourceWithValidateConfig = (*triggerResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*triggerResource)(nil)
	_ resource.ResourceWithImportState    = (*triggerResource)(nil)
)

func newTriggerResource() resource.Resource { return &triggerResource{} }

type triggerResource struct{ api *apiData }

type triggerModel struct {
	ID                      types.String `tfsdk:"id"`
	Name                    types.String `tfsdk:"name"`
	Namespace               types.String `tfsdk:"namespace"`
	Function                types.String `tfsdk:"function"`
	Type                    types.String `tfsdk:"type"`
	Enabled                 types.Bool   `tfsdk:"enabled"`
	Schedule                types.String `tfsdk:"schedule"`
	TimeZone                types.String `tfsdk:"time_zone"`
	Payload                 types.String `tfsdk:"payload"`
	ConcurrencyPolicy       types.String `tfsdk:"concurrency_policy"`
	StartingDeadlineSeconds types.Int64  `tfsdk:"starting_deadline_seconds"`
	PreWarmSeconds          types.Int64  `tfsdk:"pre_warm_seconds"`
	Queue                   types.Object `tfsdk:"queue"`
	NATS                    types.Object `tfsdk:"nats"`
	Kafka                   types.Object `tfsdk:"kafka"`
	MQTT                    types.Object `tfsdk:"mqtt"`
	URL                     types.String `tfsdk:"url"`
}

type queueModel struct {
	ConnectionSecret types.String `tfsdk:"connection_secret"`
	Queue            types.String `tfsdk:"queue"`
	Prefetch         types.Int64  `tfsdk:"prefetch"`
	Concurrency      types.Int64  `tfsdk:"concurrency"`
	MaxRetries       types.Int64  `tfsdk:"max_retries"`
	BackoffSeconds   types.Int64  `tfsdk:"backoff_seconds"`
	DeadLetterQueue  types.String `tfsdk:"dead_letter_queue"`
}

var queueAttrTypes = map[string]attr.Type{
	"connection_secret": types.StringType, "queue": types.StringType, "prefetch": types.Int64Type,
	"concurrency": types.Int64Type, "max_retries": types.Int64Type, "backoff_seconds": types.Int64Type,
	"dead_letter_queue": types.StringType,
}

type natsModel struct {
	ConnectionSecret  types.String `tfsdk:"connection_secret"`
	Stream            types.String `tfsdk:"stream"`
	Subject           types.String `tfsdk:"subject"`
	Durable           types.String `tfsdk:"durable"`
	Prefetch          types.Int64  `tfsdk:"prefetch"`
	Concurrency       types.Int64  `tfsdk:"concurrency"`
	MaxRetries        types.Int64  `tfsdk:"max_retries"`
	BackoffSeconds    types.Int64  `tfsdk:"backoff_seconds"`
	DeadLetterSubject types.String `tfsdk:"dead_letter_subject"`
}

var natsAttrTypes = map[string]attr.Type{
	"connection_secret": types.StringType, "stream": types.StringType, "subject": types.StringType, "durable": types.StringType,
	"prefetch": types.Int64Type, "concurrency": types.Int64Type, "max_retries": types.Int64Type, "backoff_seconds": types.Int64Type,
	"dead_letter_subject": types.StringType,
}

type kafkaModel struct {
	ConnectionSecret types.String `tfsdk:"connection_secret"`
	Topic            types.String `tfsdk:"topic"`
	Group            types.String `tfsdk:"group"`
	Prefetch         types.Int64  `tfsdk:"prefetch"`
	Concurrency      types.Int64  `tfsdk:"concurrency"`
	MaxRetries       types.Int64  `tfsdk:"max_retries"`
	BackoffSeconds   types.Int64  `tfsdk:"backoff_seconds"`
	DeadLetterTopic  types.String `tfsdk:"dead_letter_topic"`
}

var kafkaAttrTypes = map[string]attr.Type{
	"connection_secret": types.StringType, "topic": types.StringType, "group": types.StringType,
	"prefetch": types.Int64Type, "concurrency": types.Int64Type, "max_retries": types.Int64Type, "backoff_seconds": types.Int64Type,
	"dead_letter_topic": types.StringType,
}

type mqttModel struct {
	ConnectionSecret types.String `tfsdk:"connection_secret"`
	Topic            types.String `tfsdk:"topic"`
	ShareGroup       types.String `tfsdk:"share_group"`
	ClientID         types.String `tfsdk:"client_id"`
	Prefetch         types.Int64  `tfsdk:"prefetch"`
	Concurrency      types.Int64  `tfsdk:"concurrency"`
	MaxRetries       types.Int64  `tfsdk:"max_retries"`
	BackoffSeconds   types.Int64  `tfsdk:"backoff_seconds"`
	DeadLetterTopic  types.String `tfsdk:"dead_letter_topic"`
}

var mqttAttrTypes = map[string]attr.Type{
	"connection_secret": types.StringType, "topic": types.StringType, "share_group": types.StringType, "client_id": types.StringType,
	"prefetch": types.Int64Type, "concurrency": types.Int64Type, "max_retries": types.Int64Type, "backoff_seconds": types.Int64Type,
	"dead_letter_topic": types.StringType,
}

// deliveryAttributes are the delivery settings every consuming trigger's
// block has, with the CRD's defaults.
func deliveryAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"prefetch": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(10),
			Validators: []validator.Int64{between{1, 1000}}, Description: "Unacknowledged messages a consumer holds."},
		"concurrency": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
			Validators: []validator.Int64{between{1, 100}}, Description: "Messages delivered to the function at once."},
		"max_retries": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(3),
			Validators: []validator.Int64{between{0, 100}}, Description: "Retries before a message is dead-lettered."},
		"backoff_seconds": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
			Validators: []validator.Int64{between{1, 3600}}, Description: "First retry delay; it doubles on each retry."},
	}
}

func delivery(prefetch, concurrency, maxRetries, backoff types.Int64) slessv1alpha1.Delivery {
	return slessv1alpha1.Delivery{Prefetch: int32Ptr(prefetch), Concurrency: int32Ptr(concurrency),
		MaxRetries: int32Ptr(maxRetries), BackoffSeconds: int32Ptr(backoff)}
}

// deliveryState is d as state, the CRD's defaults for what is unset.
func deliveryState(d slessv1alpha1.Delivery, into map[string]attr.Value) map[string]attr.Value {
	orDefault := func(p *int32, def int64) types.Int64 {
		if p == nil {
			return types.Int64Value(def)
		}
		return types.Int64Value(int64(*p))
	}
	into["prefetch"], into["concurrency"] = orDefault(d.Prefetch, 10), orDefault(d.Concurrency, 1)
	into["max_retries"], into["backoff_seconds"] = orDefault(d.MaxRetries, 3), orDefault(d.BackoffSeconds, 1)
	return into
}

var triggerMapper = fieldMapper{prefixes: map[string]path.Path{
	"metadata.name":                path.Root("name"),
	"metadata.namespace":           path.Root("namespace"),
	"spec.function":                path.Root("function"),
	"spec.type":                    path.Root("type"),
	"spec.enabled":                 path.Root("enabled"),
	"spec.schedule":                path.Root("schedule"),
	"spec.timeZone":                path.Root("time_zone"),
	"spec.payload":                 path.Root("payload"),
	"spec.concurrencyPolicy":       path.Root("concurrency_policy"),
	"spec.startingDeadlineSeconds": path.Root("starting_deadline_seconds"),
	"spec.preWarmSeconds":          path.Root("pre_warm_seconds"),
	"spec.queue":                   path.Root("queue"),
	"spec.queue.connectionSecret":  path.Root("queue").AtName("connection_secret"),
	"spec.queue.queue":             path.Root("queue").AtName("queue"),
	"spec.queue.prefetch":          path.Root("queue").AtName("prefetch"),
	"spec.queue.concurrency":       path.Root("queue").AtName("concurrency"),
	"spec.queue.maxRetries":        path.Root("queue").AtName("max_retries"),
	"spec.queue.backoffSeconds":    path.Root("queue").AtName("backoff_seconds"),
	"spec.queue.deadLetterQueue":   path.Root("queue").AtName("dead_letter_queue"),
	"spec.nats":                    path.Root("nats"),
	"spec.nats.connectionSecret":   path.Root("nats").AtName("connection_secret"),
	"spec.nats.stream":             path.Root("nats").AtName("stream"),
	"spec.nats.subject":            path.Root("nats").AtName("subject"),
	"spec.nats.durable":            path.Root("nats").AtName("durable"),
	"spec.nats.prefetch":           path.Root("nats").AtName("prefetch"),
	"spec.nats.concurrency":        path.Root("nats").AtName("concurrency"),
	"spec.nats.maxRetries":         path.Root("nats").AtName("max_retries"),
	"spec.nats.backoffSeconds":     path.Root("nats").AtName("backoff_seconds"),
	"spec.nats.deadLetterSubject":  path.Root("nats").AtName("dead_letter_subject"),
	"spec.kafka":                   path.Root("kafka"),
	"spec.kafka.connectionSecret":  path.Root("kafka").AtName("connection_secret"),
	"spec.kafka.topic":             path.Root("kafka").AtName("topic"),
	"spec.kafka.group":             path.Root("kafka").AtName("group"),
	"spec.kafka.prefetch":          path.Root("kafka").AtName("prefetch"),
	"spec.kafka.concurrency":       path.Root("kafka").AtName("concurrency"),
	"spec.kafka.maxRetries":        path.Root("kafka").AtName("max_retries"),
	"spec.kafka.backoffSeconds":    path.Root("kafka").AtName("backoff_seconds"),
	"spec.kafka.deadLetterTopic":   path.Root("kafka").AtName("dead_letter_topic"),
	"spec.mqtt":                    path.Root("mqtt"),
	"spec.mqtt.connectionSecret":   path.Root("mqtt").AtName("connection_secret"),
	"spec.mqtt.topic":              path.Root("mqtt").AtName("topic"),
	"spec.mqtt.shareGroup":         path.Root("mqtt").AtName("share_group"),
	"spec.mqtt.clientID":           path.Root("mqtt").AtName("client_id"),
	"spec.mqtt.prefetch":           path.Root("mqtt").AtName("prefetch"),
	"spec.mqtt.concurrency":        path.Root("mqtt").AtName("concurrency"),
	"spec.mqtt.maxRetries":         path.Root("mqtt").AtName("max_retries"),
	"spec.mqtt.backoffSeconds":     path.Root("mqtt").AtName("backoff_seconds"),
	"spec.mqtt.deadLetterTopic":    path.Root("mqtt").AtName("dead_letter_topic"),
}}

func (r *triggerResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_trigger"
}

func (r *triggerResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.api = configureResource(req.ProviderData, &resp.Diagnostics)
}

func (r *triggerResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A sless trigger: an HTTP route, a cron schedule, a RabbitMQ queue, a NATS JetStream stream, a Kafka topic or an MQTT topic filter that calls a function.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "namespace/name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replaceString(),
				Description: "Name: a DNS-1123 label of at most 52 characters.",
				Validators:  []validator.String{dnsLabel{max: slessv1alpha1.MaxNameLength}}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIfConfigured(), stringplanmodifier.UseStateForUnknown()},
				Description:   "Namespace; the provider's when unset.", Validators: []validator.String{dnsLabel{max: 63}}},
			"function": schema.StringAttribute{Required: true, Description: "Name of the function in the same namespace.",
				Validators: []validator.String{dnsLabel{max: slessv1alpha1.MaxNameLength}}},
			"type": schema.StringAttribute{Required: true, PlanModifiers: replaceString(),
				Description: "http, cron, queue, nats, kafka or mqtt.", Validators: []validator.String{oneOf{"http", "cron", "queue", "nats", "kafka", "mqtt"}}},
			"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				Description: "false stops every invocation from this trigger (and closes an http trigger's route) without deleting it."},
			"schedule": schema.StringAttribute{Optional: true, Validators: []validator.String{notEmpty{}},
				Description: "Cron schedule (five fields or @hourly, @daily, ...), for cron triggers."},
			"time_zone": schema.StringAttribute{Optional: true, Validators: []validator.String{notEmpty{}},
				Description: "IANA time zone of the schedule; UTC when unset."},
			"payload": schema.StringAttribute{Optional: true, Validators: []validator.String{jsonString{}},
				Description: "JSON body a cron run sends; use jsonencode(...)."},
			"concurrency_policy": schema.StringAttribute{Optional: true, Validators: []validator.String{oneOf{"Allow", "Forbid", "Replace"}},
				Description: "What a cron run does when the previous one still runs: Allow, Forbid (the default) or Replace."},
			"starting_deadline_seconds": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{between{1, 86400}},
				Description: "A cron run that could not start within this many seconds of its time is skipped."},
			"pre_warm_seconds": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{between{0, slessv1alpha1.MaxPreWarmSeconds}},
				Description: "Wake the function this many seconds before each cron run so the run has no cold start."},
			"queue": schema.SingleNestedAttribute{Optional: true, Description: "The queue of a queue trigger.",
				Attributes: withAttributes(deliveryAttributes(), map[string]schema.Attribute{
					"connection_secret": schema.StringAttribute{Required: true, Validators: []validator.String{notEmpty{required: true}},
						Description: "Secret in the namespace whose key \"url\" holds the amqp:// URL."},
					"queue": schema.StringAttribute{Required: true, Validators: []validator.String{notEmpty{required: true}}, Description: "Queue to consume."},
					"dead_letter_queue": schema.StringAttribute{Optional: true, Validators: []validator.String{notEmpty{}},
						Description: "Queue for messages whose retries ran out; <queue>.dlq when unset."},
				})},
			"nats": schema.SingleNestedAttribute{Optional: true, Description: "The JetStream stream of a nats trigger.",
				Attributes: withAttributes(deliveryAttributes(), map[string]schema.Attribute{
					"connection_secret": schema.StringAttribute{Required: true, Validators: []validator.String{notEmpty{required: true}},
						Description: "Secret in the namespace whose key \"url\" holds the nats:// URL (optional keys username, password, token, ca.crt, tls.crt, tls.key)."},
					"stream":  schema.StringAttribute{Required: true, Validators: []validator.String{notEmpty{required: true}}, Description: "JetStream stream to consume; it must exist."},
					"subject": schema.StringAttribute{Required: true, Validators: []validator.String{notEmpty{required: true}}, Description: "Subject filter of the stream's messages; * and > allowed."},
					"durable": schema.StringAttribute{Optional: true, Validators: []validator.String{notEmpty{}},
						Description: "Name of the durable JetStream consumer; the trigger's name when unset."},
					"dead_letter_subject": schema.StringAttribute{Optional: true, Validators: []validator.String{notEmpty{}},
						Description: "Subject for messages whose retries ran out; dlq.<stream>.<durable> when unset."},
				})},
			"kafka": schema.SingleNestedAttribute{Optional: true, Description: "The Kafka topic of a kafka trigger.",
				Attributes: withAttributes(deliveryAttributes(), map[string]schema.Attribute{
					"connection_secret": schema.StringAttribute{Required: true, Validators: []validator.String{notEmpty{required: true}},
						Description: "Secret in the namespace whose key \"brokers\" holds the seed brokers, host:port separated by commas (optional keys sasl.mechanism, username, password, tls, ca.crt, tls.crt, tls.key)."},
					"topic": schema.StringAttribute{Required: true, Validators: []validator.String{notEmpty{required: true}}, Description: "Topic to consume; it must exist."},
					"group": schema.StringAttribute{Optional: true, Validators: []validator.String{notEmpty{}},
						Description: "Consumer group id; sless.<namespace>.<trigger> when unset."},
					"dead_letter_topic": schema.StringAttribute{Optional: true, Validators: []validator.String{notEmpty{}},
						Description: "Topic for records whose retries ran out; <topic>.dlq when unset."},
				})},
			"mqtt": schema.SingleNestedAttribute{Optional: true, Description: "The MQTT 3.1.1 topic filter of an mqtt trigger.",
				Attributes: withAttributes(deliveryAttributes(), map[string]schema.Attribute{
					"connection_secret": schema.StringAttribute{Required: true, Validators: []validator.String{notEmpty{required: true}},
						Description: "Secret in the namespace whose key \"url\" holds the broker's tcp://, ssl://, ws:// or wss:// URL (optional keys username, password, ca.crt, tls.crt, tls.key)."},
					"topic": schema.StringAttribute{Required: true, Validators: []validator.String{notEmpty{required: true}}, Description: "Topic filter to subscribe to; + and # allowed."},
					"share_group": schema.StringAttribute{Optional: true, Validators: []validator.String{notEmpty{}},
						Description: "Subscribe as $share/<share_group>/<topic>, so the group's subscribers split the messages."},
					"client_id": schema.StringAttribute{Optional: true, Validators: []validator.String{notEmpty{}},
						Description: "Client id of the consumer's persistent session; sless-<namespace>-<trigger> when unset."},
					"dead_letter_topic": schema.StringAttribute{Optional: true, Validators: []validator.String{notEmpty{}},
						Description: "Topic for messages whose retries ran out; sless/dlq/<namespace>/<trigger> when unset."},
				})},
			"url": schema.StringAttribute{Computed: true, Description: "Public URL of an enabled http trigger.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		},
	}
}

func (m *triggerModel) object(ctx context.Context, ns string) (*slessv1alpha1.Trigger, diag.Diagnostics) {
	var diags diag.Diagnostics
	t := &slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.Name.ValueString()},
		Spec: slessv1alpha1.TriggerSpec{
			Function:                m.Function.ValueString(),
			Type:                    slessv1alpha1.TriggerType(m.Type.ValueString()),
			Schedule:                m.Schedule.ValueString(),
			TimeZone:                m.TimeZone.ValueString(),
			Payload:                 jsonValue(m.Payload),
			ConcurrencyPolicy:       slessv1alpha1.ConcurrencyPolicy(m.ConcurrencyPolicy.ValueString()),
			StartingDeadlineSeconds: int64Ptr(m.StartingDeadlineSeconds),
			PreWarmSeconds:          int32Ptr(m.PreWarmSeconds),
		},
	}
	if !m.Enabled.IsNull() && !m.Enabled.IsUnknown() {
		b := m.Enabled.ValueBool()
		t.Spec.Enabled = &b
	}
	if !m.Queue.IsNull() && !m.Queue.IsUnknown() {
		var q queueModel
		diags.Append(m.Queue.As(ctx, &q, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
		t.Spec.Queue = &slessv1alpha1.QueueSpec{
			ConnectionSecret: q.ConnectionSecret.ValueString(), Queue: q.Queue.ValueString(),
			Delivery:        delivery(q.Prefetch, q.Concurrency, q.MaxRetries, q.BackoffSeconds),
			DeadLetterQueue: q.DeadLetterQueue.ValueString(),
		}
	}
	if !m.NATS.IsNull() && !m.NATS.IsUnknown() {
		var n natsModel
		diags.Append(m.NATS.As(ctx, &n, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
		t.Spec.NATS = &slessv1alpha1.NATSSpec{
			ConnectionSecret: n.ConnectionSecret.ValueString(), Stream: n.Stream.ValueString(), Subject: n.Subject.ValueString(),
			Durable:           n.Durable.ValueString(),
			Delivery:          delivery(n.Prefetch, n.Concurrency, n.MaxRetries, n.BackoffSeconds),
			DeadLetterSubject: n.DeadLetterSubject.ValueString(),
		}
	}
	if !m.Kafka.IsNull() && !m.Kafka.IsUnknown() {
		var k kafkaModel
		diags.Append(m.Kafka.As(ctx, &k, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
		t.Spec.Kafka = &slessv1alpha1.KafkaSpec{
			ConnectionSecret: k.ConnectionSecret.ValueString(), Topic: k.Topic.ValueString(), Group: k.Group.ValueString(),
			Delivery:        delivery(k.Prefetch, k.Concurrency, k.MaxRetries, k.BackoffSeconds),
			DeadLetterTopic: k.DeadLetterTopic.ValueString(),
		}
	}
	if !m.MQTT.IsNull() && !m.MQTT.IsUnknown() {
		var q mqttModel
		diags.Append(m.MQTT.As(ctx, &q, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
		t.Spec.MQTT = &slessv1alpha1.MQTTSpec{
			ConnectionSecret: q.ConnectionSecret.ValueString(), Topic: q.Topic.ValueString(),
			ShareGroup: q.ShareGroup.ValueString(), ClientID: q.ClientID.ValueString(),
			Delivery:        delivery(q.Prefetch, q.Concurrency, q.MaxRetries, q.BackoffSeconds),
			DeadLetterTopic: q.DeadLetterTopic.ValueString(),
		}
	}
	return t, diags
}

func triggerState(t *slessv1alpha1.Trigger, prior *triggerModel) (triggerModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	s := t.Spec
	m := triggerModel{
		ID:                      types.StringValue(t.Namespace + "/" + t.Name),
		Name:                    types.StringValue(t.Name),
		Namespace:               types.StringValue(t.Namespace),
		Function:                types.StringValue(s.Function),
		Type:                    types.StringValue(string(s.Type)),
		Enabled:                 types.BoolValue(t.IsEnabled()),
		Schedule:                optString(s.Schedule),
		TimeZone:                optString(s.TimeZone),
		Payload:                 jsonState(prior.Payload, s.Payload),
		ConcurrencyPolicy:       optString(string(s.ConcurrencyPolicy)),
		StartingDeadlineSeconds: optInt64(s.StartingDeadlineSeconds),
		PreWarmSeconds:          optInt32(s.PreWarmSeconds),
		Queue:                   types.ObjectNull(queueAttrTypes),
		NATS:                    types.ObjectNull(natsAttrTypes),
		Kafka:                   types.ObjectNull(kafkaAttrTypes),
		MQTT:                    types.ObjectNull(mqttAttrTypes),
		URL:                     optString(t.Status.URL),
	}
	if q := s.Queue; q != nil {
		obj, d := types.ObjectValue(queueAttrTypes, deliveryState(q.Delivery, map[string]attr.Value{
			"connection_secret": types.StringValue(q.ConnectionSecret), "queue": types.StringValue(q.Queue),
			"dead_letter_queue": optString(q.DeadLetterQueue),
		}))
		diags.Append(d...)
		m.Queue = obj
	}
	if n := s.NATS; n != nil {
		obj, d := types.ObjectValue(natsAttrTypes, deliveryState(n.Delivery, map[string]attr.Value{
			"connection_secret": types.StringValue(n.ConnectionSecret), "stream": types.StringValue(n.Stream),
			"subject": types.StringValue(n.Subject), "durable": optString(n.Durable),
			"dead_letter_subject": optString(n.DeadLetterSubject),
		}))
		diags.Append(d...)
		m.NATS = obj
	}
	if k := s.Kafka; k != nil {
		obj, d := types.ObjectValue(kafkaAttrTypes, deliveryState(k.Delivery, map[string]attr.Value{
			"connection_secret": types.StringValue(k.ConnectionSecret), "topic": types.StringValue(k.Topic),
			"group": optString(k.Group), "dead_letter_topic": optString(k.DeadLetterTopic),
		}))
		diags.Append(d...)
		m.Kafka = obj
	}
	if q := s.MQTT; q != nil {
		obj, d := types.ObjectValue(mqttAttrTypes, deliveryState(q.Delivery, map[string]attr.Value{
			"connection_secret": types.StringValue(q.ConnectionSecret), "topic": types.StringValue(q.Topic),
			"share_group": optString(q.ShareGroup), "client_id": optString(q.ClientID),
			"dead_letter_topic": optString(q.DeadLetterTopic),
		}))
		diags.Append(d...)
		m.MQTT = obj
	}
	return m, diags
}

// cronOnlyAttributes are the attributes of the API fields only cron
// triggers take.
var cronOnlyAttributes = map[string]string{"spec.schedule": "schedule", "spec.timeZone": "time_zone",
	"spec.preWarmSeconds": "pre_warm_seconds", "spec.concurrencyPolicy": "concurrency_policy"}

func (r *triggerResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m triggerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	t, d := m.object(ctx, "")
	resp.Diagnostics.Append(d...)
	var errs field.ErrorList
	for _, e := range slessv1alpha1.ValidateTrigger(t) {
		if (e.Field == "metadata.name" && m.Name.IsUnknown()) || (e.Field == "spec.function" && m.Function.IsUnknown()) ||
			(e.Field == "spec.type" && m.Type.IsUnknown()) || (e.Field == "spec.schedule" && m.Schedule.IsUnknown()) ||
			(e.Field == "spec.queue" && m.Queue.IsUnknown()) || (e.Field == "spec.nats" && m.NATS.IsUnknown()) ||
			(e.Field == "spec.kafka" && m.Kafka.IsUnknown()) || (e.Field == "spec.mqtt" && m.MQTT.IsUnknown()) {
			continue
		}
		cronOnly, isCronOnly := cronOnlyAttributes[e.Field]
		if e.Type == field.ErrorTypeForbidden && (isCronOnly || e.Field == "spec.queue" || e.Field == "spec.nats" || e.Field == "spec.kafka" || e.Field == "spec.mqtt") {
			if m.Type.IsUnknown() {
				// Which settings a trigger may have depends on its type,
				// which is not known yet.
				continue
			}
			if isCronOnly {
				// Named as the configuration names it, with the type that
				// does not take it.
				attrError(&resp.Diagnostics, path.Root(cronOnly), "Invalid configuration",
					fmt.Sprintf("applies only to cron triggers, and this one is %s", m.Type.ValueString()))
				continue
			}
		}
		errs = append(errs, e)
	}
	triggerMapper.addFieldErrors(&resp.Diagnostics, errs, skippedAttributes(ctx, resourceAttributes(ctx, r), req.Config))
}

func (r *triggerResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan, config triggerModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !req.State.Raw.IsNull() {
		var state triggerModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		changed := planExistingNamespace(ctx, r.api, config.Namespace, &plan.Namespace, resp)
		// Enabling or disabling an http trigger opens or closes its route;
		// other types have no URL whatever they are set to (the type never
		// changes in place: a new type replaces the trigger).
		if plan.Type.ValueString() == string(slessv1alpha1.TriggerTypeHTTP) &&
			(!plan.Enabled.Equal(state.Enabled) || !plan.Function.Equal(state.Function)) {
			plan.URL = types.StringUnknown()
			changed = true
		}
		if changed {
			resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		}
		return
	}
	if !planNewObject(ctx, r.api, config.Namespace, plan.Name, &plan.Namespace, &plan.ID, &resp.Diagnostics) {
		return
	}
	if plan.Type.ValueString() != string(slessv1alpha1.TriggerTypeHTTP) {
		// Only http triggers have a URL.
		plan.URL = types.StringNull()
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *triggerResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan triggerModel
	if !applyModel(ctx, r.api, req.Plan, &plan, &resp.Diagnostics) {
		return
	}
	t, d := plan.object(ctx, plan.Namespace.ValueString())
	resp.Diagnostics.Append(d...)
	progress(ctx, "trigger", t.Namespace, t.Name, "creating")
	got, err := r.api.client.CreateTrigger(ctx, t)
	if err != nil {
		if nameTaken(ctx, r.api.client, (*client.Client).GetTrigger, t.Namespace, t.Name, err) {
			addExistsError(&resp.Diagnostics, "trigger", t.Namespace, t.Name)
			return
		}
		triggerMapper.addAPIError(&resp.Diagnostics, "Creating the trigger failed", err)
		return
	}
	r.settle(ctx, &plan, got, &resp.Diagnostics, &resp.State)
}

// settle saves a trigger's state after a write. An http trigger's URL is set
// by the controller a moment after the write; it is waited for briefly so
// the apply knows it.
func (r *triggerResource) settle(ctx context.Context, plan *triggerModel, t *slessv1alpha1.Trigger, diags *diag.Diagnostics, state interface {
	Set(context.Context, any) diag.Diagnostics
}) {
	if t.Spec.Type == slessv1alpha1.TriggerTypeHTTP && t.IsEnabled() && t.Status.URL == "" {
		p := newPoller(30 * time.Second)
		for t.Status.URL == "" {
			// A trigger the controller refused for this generation (its
			// function does not exist, say) gets no URL however long the
			// wait: say why now instead of after the whole wait, in silence.
			if ready := condition(t.Status.Conditions, slessv1alpha1.TriggerConditionReady); ready != nil &&
				ready.Status == metav1.ConditionFalse && t.Status.ObservedGeneration == t.Generation {
				diags.AddWarning("Trigger has no URL",
					fmt.Sprintf("trigger %s/%s is not ready (%s): %s. Its url stays null until it is; a later refresh reads it.",
						t.Namespace, t.Name, ready.Reason, ready.Message))
				break
			}
			if p.wait(ctx) != nil {
				diags.AddWarning("Trigger has no URL yet",
					fmt.Sprintf("trigger %s/%s got no URL within 30s; its url stays null until a later refresh reads it.", t.Namespace, t.Name))
				break
			}
			next, err := r.api.client.GetTrigger(ctx, t.Namespace, t.Name)
			if err != nil {
				break
			}
			t = next
		}
	}
	st, d := triggerState(t, plan)
	diags.Append(d...)
	diags.Append(state.Set(ctx, &st)...)
}

func (r *triggerResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var prior triggerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	t, ok := readObject(ctx, r.api, "trigger", prior.ID, prior.Namespace, prior.Name, (*client.Client).GetTrigger, resp)
	if !ok {
		return
	}
	st, d := triggerState(t, &prior)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *triggerResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if !requireAPI(r.api, &resp.Diagnostics) {
		return
	}
	var plan, state triggerModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	t, d := plan.object(ctx, state.Namespace.ValueString())
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	progress(ctx, "trigger", t.Namespace, t.Name, "updating")
	got, err := replaceSpec(ctx, t.Namespace, t.Name, r.api.client.GetTrigger,
		func(cur *slessv1alpha1.Trigger) { cur.Spec, cur.Status = t.Spec, slessv1alpha1.TriggerStatus{} },
		r.api.client.ReplaceTrigger)
	if err != nil {
		triggerMapper.addAPIError(&resp.Diagnostics, "Updating the trigger failed", err)
		return
	}
	r.settle(ctx, &plan, got, &resp.Diagnostics, &resp.State)
}

func (r *triggerResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state triggerModel
	if !applyModel(ctx, r.api, req.State, &state, &resp.Diagnostics) {
		return
	}
	deleteObject(ctx, r.api.client, "trigger", state.Namespace, state.Name, triggerDeleteWait,
		(*client.Client).DeleteTrigger, (*client.Client).GetTrigger, &resp.Diagnostics)
}

func (r *triggerResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importInto(ctx, r.api, req, resp)
}

// withAttributes adds more to attrs and returns it.
func withAttributes(attrs, more map[string]schema.Attribute) map[string]schema.Attribute {
	maps.Copy(attrs, more)
	return attrs
}
