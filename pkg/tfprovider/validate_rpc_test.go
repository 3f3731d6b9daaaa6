package tfprovider

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// validateConfig sends a resource configuration through the provider's
// ValidateResourceConfig, as the CLI does at plan: attrs are the set
// attributes (nested objects as maps of their set attributes), the rest null.
func validateConfig(t *testing.T, typeName string, attrs map[string]any) []*tfprotov6.Diagnostic {
	t.Helper()
	ctx := context.Background()
	srv, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	schemas, err := srv.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	typ := schemas.ResourceSchemas[typeName].ValueType().(tftypes.Object)
	dv, err := tfprotov6.NewDynamicValue(typ, tfValue(t, typ, attrs))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: typeName, Config: &dv})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Diagnostics
}

func tfValue(t *testing.T, typ tftypes.Object, attrs map[string]any) tftypes.Value {
	t.Helper()
	vals := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		vals[name] = toTF(t, at, attrs[name])
	}
	for name := range attrs {
		if _, ok := typ.AttributeTypes[name]; !ok {
			t.Fatalf("no attribute %s", name)
		}
	}
	return tftypes.NewValue(typ, vals)
}

// unknown stands for a value known only after apply.
type unknown struct{}

// toTF is v as a value of typ: nil is null, unknown{} unknown, a
// map[string]any an object or a map, an int a number.
func toTF(t *testing.T, typ tftypes.Type, v any) tftypes.Value {
	t.Helper()
	switch v := v.(type) {
	case nil:
		return tftypes.NewValue(typ, nil)
	case unknown:
		return tftypes.NewValue(typ, tftypes.UnknownValue)
	case map[string]any:
		switch typ := typ.(type) {
		case tftypes.Object:
			return tfValue(t, typ, v)
		case tftypes.Map:
			elems := map[string]tftypes.Value{}
			for k, e := range v {
				elems[k] = toTF(t, typ.ElementType, e)
			}
			return tftypes.NewValue(typ, elems)
		}
		t.Fatalf("a map for %s", typ)
	case int:
		return tftypes.NewValue(typ, int64(v))
	}
	return tftypes.NewValue(typ, v)
}

// What the CLI gets from validating a configuration at plan: each refused
// value reported once, by the attribute's own validator when it has one
// (with the value as written: the spec the API validation judges clamps
// numbers to int32) and by the API's validation otherwise, the detail
// naming the attribute even when it is nested; and no error for a value
// that is only not known yet.
func TestValidateResourceConfig(t *testing.T) {
	fn := func(extra map[string]any) map[string]any {
		m := map[string]any{"name": "hello", "runtime": "python3.12", "entrypoint": "main.handler", "source_dir": "./src"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		typeName string
		attrs    map[string]any
		// detail must match the one error's detail; "" means no error.
		detail string
	}{
		{"memory below the limit", "sless_function", fn(map[string]any{"memory_mb": -10}), `^memory_mb: -10 is out of range: must be between 64 and 4096$`},
		{"memory beyond int32", "sless_function", fn(map[string]any{"memory_mb": 10000000000}), `^memory_mb: 10000000000 is out of range`},
		{"timeout zero", "sless_function", fn(map[string]any{"timeout_sec": 0}), `^timeout_sec: 0 is out of range: must be between 1 and 900$`},
		{"zero cpu", "sless_function", fn(map[string]any{"cpu": "0"}), `^cpu: "0" must be a positive CPU quantity`},
		{"name with capitals", "sless_function", fn(map[string]any{"name": "Hello"}), `^name: "Hello" must be a DNS label`},
		// Only the API's validation knows a function name starts with a letter.
		{"name starting with a digit", "sless_function", fn(map[string]any{"name": "1hello"}), `^name: Invalid value: "1hello": name must be a DNS-1035 label$`},
		{"nested scale target", "sless_function", fn(map[string]any{"scale": map[string]any{"target": 0}}), `^scale\.target: 0 is out of range: must be between 1 and 1000$`},
		{"nested container concurrency", "sless_function", fn(map[string]any{"scale": map[string]any{"container_concurrency": -1}}), `^scale\.container_concurrency: -1 is out of range`},
		{"scale max below min", "sless_function", fn(map[string]any{"scale": map[string]any{"min": 5, "max": 2}}), `^scale\.max: Invalid value: 2: max.* must be greater than or equal to min`},
		{"trigger deadline zero", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "http", "starting_deadline_seconds": 0},
			`^starting_deadline_seconds: 0 is out of range: must be between 1 and 86400$`},
		{"queue prefetch zero", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "queue",
			"queue": map[string]any{"connection_secret": "amqp", "queue": "q", "prefetch": 0}}, `^queue\.prefetch: 0 is out of range: must be between 1 and 1000$`},
		{"nats", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "nats",
			"nats": map[string]any{"connection_secret": "nats", "stream": "ORDERS", "subject": "orders.>"}}, ""},
		{"nats subject with > inside", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "nats",
			"nats": map[string]any{"connection_secret": "nats", "stream": "ORDERS", "subject": "orders.>.eu"}}, `^nats\.subject: Invalid value: "orders\.>\.eu": subject must be tokens`},
		{"nats dead letters consumed again", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "nats",
			"nats": map[string]any{"connection_secret": "nats", "stream": "ORDERS", "subject": "orders.>", "dead_letter_subject": "orders.dead"}}, `^nats\.dead_letter_subject: .*must not match subject orders\.>`},
		{"nats concurrency zero", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "nats",
			"nats": map[string]any{"connection_secret": "nats", "stream": "ORDERS", "subject": "o", "concurrency": 0}}, `^nats\.concurrency: 0 is out of range: must be between 1 and 100$`},
		{"nats block on a queue trigger", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "queue",
			"queue": map[string]any{"connection_secret": "amqp", "queue": "q"}, "nats": map[string]any{"connection_secret": "nats", "stream": "S", "subject": "s"}}, `^nats: .*nats applies only to nats triggers`},
		{"kafka", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "kafka",
			"kafka": map[string]any{"connection_secret": "kafka", "topic": "orders", "group": "g", "dead_letter_topic": "orders.dead"}}, ""},
		{"kafka topic with a slash", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "kafka",
			"kafka": map[string]any{"connection_secret": "kafka", "topic": "a/b"}}, `^kafka\.topic: Invalid value: "a/b": topic must be letters, digits`},
		{"kafka dead letters to the topic", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "kafka",
			"kafka": map[string]any{"connection_secret": "kafka", "topic": "orders", "dead_letter_topic": "orders"}}, `^kafka\.dead_letter_topic: .*must differ from topic`},
		{"kafka group dot dot", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "kafka",
			"kafka": map[string]any{"connection_secret": "kafka", "topic": "orders", "group": ".."}}, `^kafka\.group: .*must not be \. or \.\.`},
		{"kafka prefetch zero", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "kafka",
			"kafka": map[string]any{"connection_secret": "kafka", "topic": "o", "prefetch": 0}}, `^kafka\.prefetch: 0 is out of range: must be between 1 and 1000$`},
		{"kafka without its block", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "kafka"}, `^kafka: .*kafka is required for kafka triggers`},
		{"kafka block on a nats trigger", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "nats",
			"nats": map[string]any{"connection_secret": "nats", "stream": "S", "subject": "s"}, "kafka": map[string]any{"connection_secret": "k", "topic": "t"}}, `^kafka: .*kafka applies only to kafka triggers`},
		{"mqtt", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "mqtt",
			"mqtt": map[string]any{"connection_secret": "mqtt", "topic": "sensors/+/temp", "share_group": "g", "client_id": "c-1", "dead_letter_topic": "dead/temp"}}, ""},
		{"mqtt # not last", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "mqtt",
			"mqtt": map[string]any{"connection_secret": "mqtt", "topic": "a/#/b"}}, `^mqtt\.topic: Invalid value: "a/#/b": topic must be levels separated by /`},
		{"mqtt shared filter", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "mqtt",
			"mqtt": map[string]any{"connection_secret": "mqtt", "topic": "$share/g/a"}}, `^mqtt\.topic: .*set shareGroup for a shared subscription`},
		{"mqtt share group with a slash", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "mqtt",
			"mqtt": map[string]any{"connection_secret": "mqtt", "topic": "a", "share_group": "g/h"}}, `^mqtt\.share_group: .*must not contain /`},
		{"mqtt client id with a space", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "mqtt",
			"mqtt": map[string]any{"connection_secret": "mqtt", "topic": "a", "client_id": "a b"}}, `^mqtt\.client_id: .*clientID must be letters`},
		{"mqtt dead letters consumed again", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "mqtt",
			"mqtt": map[string]any{"connection_secret": "mqtt", "topic": "a/#", "dead_letter_topic": "a/dead"}}, `^mqtt\.dead_letter_topic: .*must not match topic a/#`},
		{"mqtt max retries", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "mqtt",
			"mqtt": map[string]any{"connection_secret": "mqtt", "topic": "a", "max_retries": 101}}, `^mqtt\.max_retries: 101 is out of range: must be between 0 and 100$`},
		{"mqtt without its block", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "mqtt"}, `^mqtt: .*mqtt is required for mqtt triggers`},
		{"mqtt block on a kafka trigger", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "kafka",
			"kafka": map[string]any{"connection_secret": "k", "topic": "t"}, "mqtt": map[string]any{"connection_secret": "m", "topic": "t"}}, `^mqtt: .*mqtt applies only to mqtt triggers`},
		{"job name too long", "sless_job", map[string]any{"name": strings.Repeat("a", 41), "function": "f"}, `^name: "a+" must be a DNS label of at most 40 characters`},
		// Secret names are DNS-1123 subdomains: dots are fine.
		{"secret name with dots", "sless_function", fn(map[string]any{"secret_env": map[string]any{
			"DB": map[string]any{"secret": "db.credentials", "key": "url"}}}), ""},
		{"secret name with capitals", "sless_function", fn(map[string]any{"secret_env": map[string]any{
			"DB": map[string]any{"secret": "Db_Credentials", "key": "url"}}}), `^secret_env\["DB"\]\.secret: "Db_Credentials" must be a DNS-1123 subdomain`},
		// A required attribute cannot be left out: the message does not say to.
		{"empty secret key", "sless_function", fn(map[string]any{"secret_env": map[string]any{
			"DB": map[string]any{"secret": "db", "key": ""}}}), `^secret_env\["DB"\]\.key: must not be empty$`},
		{"empty queue name", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "queue",
			"queue": map[string]any{"connection_secret": "amqp", "queue": ""}}, `^queue\.queue: must not be empty$`},
		// Values known only after apply are judged then, not called missing now.
		{"queue settings from another resource", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "queue",
			"queue": map[string]any{"connection_secret": unknown{}, "queue": unknown{}}}, ""},
		{"queue from another resource", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "queue", "queue": unknown{}}, ""},
		{"known mistake beside unknown values", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "queue",
			"queue": map[string]any{"connection_secret": unknown{}, "queue": "q", "prefetch": 0}}, `^queue\.prefetch: 0 is out of range`},
		{"scale from another resource", "sless_function", fn(map[string]any{"scale": map[string]any{"min": 5, "max": unknown{}}}), ""},
		// A cron-only setting on another type is named as the configuration names it.
		{"pre-warm on an http trigger", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "http", "pre_warm_seconds": 30},
			`^pre_warm_seconds: applies only to cron triggers, and this one is http$`},
		{"time zone on a queue trigger", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": "queue", "time_zone": "UTC",
			"queue": map[string]any{"connection_secret": "amqp", "queue": "q"}}, `^time_zone: applies only to cron triggers, and this one is queue$`},
		{"schedule while the type is unknown", "sless_trigger", map[string]any{"name": "t", "function": "f", "type": unknown{}, "schedule": "@hourly"}, ""},
		{"job timeout zero", "sless_job", map[string]any{"name": "j", "function": "f", "timeout_sec": 0}, `^timeout_sec: 0 is out of range: must be between 1 and 86400$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errs []*tfprotov6.Diagnostic
			for _, d := range validateConfig(t, tc.typeName, tc.attrs) {
				if d.Severity == tfprotov6.DiagnosticSeverityError {
					errs = append(errs, d)
				}
			}
			want := 1
			if tc.detail == "" {
				want = 0
			}
			if len(errs) != want {
				var got []string
				for _, d := range errs {
					got = append(got, d.Summary+": "+d.Detail)
				}
				t.Fatalf("%d errors, want %d:\n%s", len(errs), want, strings.Join(got, "\n"))
			}
			if want == 0 {
				return
			}
			if !regexp.MustCompile(tc.detail).MatchString(errs[0].Detail) {
				t.Errorf("detail %q does not match %s", errs[0].Detail, tc.detail)
			}
			if errs[0].Attribute == nil {
				t.Errorf("error %q names no attribute", errs[0].Detail)
			}
		})
	}
}
