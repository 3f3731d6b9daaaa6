package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// specCase is one row of the table the CRD schema and the Go validation must
// agree on. field is the path the Go validation must name; the apiserver's
// message must contain msg (field when msg is empty).
type specCase struct {
	name  string
	doc   string
	valid bool
	field string
	msg   string
	// goOnly marks what the schema cannot check (an unknown time zone): the
	// apiserver accepts it and the Go validation, which the REST API runs, refuses.
	goOnly bool
}

const pyFiles = `
  source:
    inline:
      files:
        main.py: "def handler(event, context):\n    return 1\n"`

func fn(name, spec string) string {
	return "apiVersion: sless.dev/v1alpha1\nkind: Function\nmetadata:\n  name: " + name + "\nspec:\n" + spec
}

func pyFn(name, extra string) string {
	return fn(name, "  runtime: python3.12\n  entrypoint: main.handler\n"+extra+pyFiles)
}

func trg(name, spec string) string {
	return "apiVersion: sless.dev/v1alpha1\nkind: Trigger\nmetadata:\n  name: " + name + "\nspec:\n  function: greeter\n" + spec
}

func job(name, spec string) string {
	return "apiVersion: sless.dev/v1alpha1\nkind: FunctionJob\nmetadata:\n  name: " + name + "\nspec:\n" + spec
}

const sha = "0c9f1bd2e3d4c5b6a7980a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f"

var specCases = []specCase{
	// Functions that both accept.
	{name: "minimal inline", doc: pyFn("ok-min", ""), valid: true},
	{name: "image without entrypoint", doc: fn("ok-image", "  runtime: go1.24\n  source:\n    image: registry.example.com/a/b@sha256:"+sha+"\n"), valid: true},
	{name: "node alias", doc: fn("ok-node", "  runtime: nodejs20\n  entrypoint: lib/api.handle\n  source:\n    inline:\n      files:\n        lib/api.js: \"exports.handle = () => 1\"\n"), valid: true},
	{name: "python alias", doc: fn("ok-py311", "  runtime: python3.11\n  entrypoint: pkg.mod.handler\n"+pyFiles), valid: true},
	{name: "go entrypoint", doc: fn("ok-go", "  runtime: go1.24\n  entrypoint: function.Handle\n  source:\n    inline:\n      files:\n        fn.go: \"package function\"\n"), valid: true},
	{name: "bounds inclusive", doc: pyFn("ok-bounds", "  memoryMB: 4096\n  timeoutSeconds: 900\n  buildTimeoutSeconds: 60\n  cpu: 250m\n"), valid: true},
	{name: "lower bounds", doc: pyFn("ok-lower", "  memoryMB: 64\n  timeoutSeconds: 1\n  cpu: 1\n"), valid: true},
	{name: "scale equal", doc: pyFn("ok-scale", "  scale:\n    min: 2\n    max: 2\n    target: 10\n    containerConcurrency: 0\n"), valid: true},
	{name: "env from secret", doc: pyFn("ok-env", "  env:\n  - name: A\n    value: x\n  - name: B_2\n    valueFrom:\n      secretKeyRef:\n        name: s\n        key: k\n"), valid: true},
	{name: "archive", doc: fn("ok-archive", "  runtime: python3.12\n  entrypoint: main.handler\n  source:\n    archive:\n      bucket: sless\n      key: ns/fn/source/"+sha+".zip\n      sha256: "+sha+"\n"), valid: true},

	// Functions that both refuse.
	{name: "negative memory", doc: pyFn("bad-mem", "  memoryMB: -10\n"), field: "spec.memoryMB"},
	{name: "memory below", doc: pyFn("bad-mem-lo", "  memoryMB: 63\n"), field: "spec.memoryMB"},
	{name: "memory above", doc: pyFn("bad-mem-hi", "  memoryMB: 4097\n"), field: "spec.memoryMB"},
	{name: "timeout zero", doc: pyFn("bad-to", "  timeoutSeconds: 0\n"), field: "spec.timeoutSeconds"},
	{name: "timeout above", doc: pyFn("bad-to-hi", "  timeoutSeconds: 901\n"), field: "spec.timeoutSeconds"},
	{name: "build timeout below", doc: pyFn("bad-bto", "  buildTimeoutSeconds: 30\n"), field: "spec.buildTimeoutSeconds"},
	{name: "rebuild timestamp", doc: pyFn("ok-rebuild", "  rebuild: \"2026-12-03T12:00:00Z\"\n"), valid: true},
	{name: "rebuild counter", doc: pyFn("ok-rebuild-n", "  rebuild: \"7\"\n"), valid: true},
	{name: "rebuild with a space", doc: pyFn("bad-rebuild-space", "  rebuild: \"try again\"\n"), field: "spec.rebuild"},
	{name: "rebuild ending in a dash", doc: pyFn("bad-rebuild-dash", "  rebuild: \"x-\"\n"), field: "spec.rebuild"},
	{name: "rebuild too long", doc: pyFn("bad-rebuild-long", "  rebuild: \""+strings.Repeat("a", 64)+"\"\n"), field: "spec.rebuild"},
	{name: "rebuild of an image", doc: fn("bad-rebuild-image", "  runtime: go1.24\n  rebuild: \"1\"\n  source:\n    image: nginx\n"), field: "spec.rebuild"},
	{name: "zero cpu", doc: pyFn("bad-cpu", "  cpu: \"0\"\n"), field: "spec.cpu"},
	{name: "unknown runtime", doc: fn("bad-rt", "  runtime: ruby3.0\n  entrypoint: main.handler\n"+pyFiles), field: "spec.runtime"},
	{name: "missing runtime", doc: fn("bad-rt-none", "  entrypoint: main.handler\n"+pyFiles), field: "spec.runtime"},
	{name: "two sources", doc: fn("bad-two", "  runtime: python3.12\n  entrypoint: main.handler\n  source:\n    image: registry.example.com/a:1\n    inline:\n      files:\n        main.py: x\n"), field: "spec.source"},
	{name: "no source", doc: fn("bad-none", "  runtime: python3.12\n  entrypoint: main.handler\n  source: {}\n"), field: "spec.source"},
	{name: "empty entrypoint", doc: fn("bad-ep-empty", "  runtime: python3.12\n  entrypoint: \"\"\n"+pyFiles), field: "spec.entrypoint"},
	{name: "missing entrypoint", doc: fn("bad-ep-none", "  runtime: python3.12\n"+pyFiles), field: "spec.entrypoint"},
	{name: "entrypoint without function", doc: fn("bad-ep-nodot", "  runtime: python3.12\n  entrypoint: main\n"+pyFiles), field: "spec.entrypoint"},
	{name: "entrypoint with call", doc: fn("bad-ep-call", "  runtime: python3.12\n  entrypoint: main.handler()\n"+pyFiles), field: "spec.entrypoint"},
	{name: "max below min", doc: pyFn("bad-scale", "  scale:\n    min: 3\n    max: 1\n"), field: "spec.scale.max"},
	{name: "negative min", doc: pyFn("bad-min", "  scale:\n    min: -1\n"), field: "spec.scale.min"},
	{name: "container concurrency above", doc: pyFn("bad-cc", "  scale:\n    containerConcurrency: 1001\n"), field: "spec.scale.containerConcurrency"},
	{name: "async set", doc: pyFn("ok-async", "  async:\n    concurrency: 2\n    maxRetries: 0\n    maxEventAgeSeconds: 60\n"), valid: true},
	{name: "async concurrency zero", doc: pyFn("bad-async-cc", "  async:\n    concurrency: 0\n"), field: "spec.async.concurrency"},
	{name: "async retries above", doc: pyFn("bad-async-retries", "  async:\n    maxRetries: 11\n"), field: "spec.async.maxRetries"},
	{name: "async negative retries", doc: pyFn("bad-async-neg", "  async:\n    maxRetries: -1\n"), field: "spec.async.maxRetries"},
	{name: "async event age below", doc: pyFn("bad-async-age", "  async:\n    maxEventAgeSeconds: 59\n"), field: "spec.async.maxEventAgeSeconds"},
	{name: "async event age above", doc: pyFn("bad-async-age2", "  async:\n    maxEventAgeSeconds: 21601\n"), field: "spec.async.maxEventAgeSeconds"},
	{name: "async callbacks", doc: pyFn("ok-async-cb", "  async:\n    onSuccess: https://hooks.example.com/done?fn=a\n    onFailure: http://[::1]:9000/failed#x\n"), valid: true},
	{name: "callback scheme", doc: pyFn("bad-cb-scheme", "  async:\n    onSuccess: ftp://hooks.example.com/\n"), field: "spec.async.onSuccess"},
	{name: "callback user info", doc: pyFn("bad-cb-user", "  async:\n    onFailure: https://user:pw@hooks.example.com/\n"), field: "spec.async.onFailure"},
	{name: "callback relative", doc: pyFn("bad-cb-rel", "  async:\n    onSuccess: /done\n"), field: "spec.async.onSuccess"},
	{name: "callback no host", doc: pyFn("bad-cb-host", "  async:\n    onSuccess: https:///done\n"), field: "spec.async.onSuccess"},
	{name: "callback space", doc: pyFn("bad-cb-space", "  async:\n    onSuccess: \"https://hooks.example.com/a b\"\n"), field: "spec.async.onSuccess"},
	{name: "callback upper-case scheme", doc: pyFn("bad-cb-upper", "  async:\n    onSuccess: HTTPS://hooks.example.com/\n"), field: "spec.async.onSuccess"},
	{name: "callback too long", doc: pyFn("bad-cb-long", "  async:\n    onFailure: https://hooks.example.com/"+strings.Repeat("a", v1.MaxCallbackURLLength)+"\n"), field: "spec.async.onFailure"},
	{name: "callback bad port", doc: pyFn("bad-cb-port", "  async:\n    onSuccess: https://hooks.example.com:http/\n"), field: "spec.async.onSuccess", goOnly: true},
	{name: "callback bad escape", doc: pyFn("bad-cb-esc", "  async:\n    onSuccess: https://hooks%zz.example.com/\n"), field: "spec.async.onSuccess", goOnly: true},
	{name: "reserved env", doc: pyFn("bad-env-port", "  env:\n  - name: PORT\n    value: \"1\"\n"), field: "spec.env[0].name"},
	{name: "sless env", doc: pyFn("bad-env-sless", "  env:\n  - name: SLESS_MODE\n    value: job\n"), field: "spec.env[0].name"},
	{name: "env name", doc: pyFn("bad-env-name", "  env:\n  - name: 1X\n    value: \"1\"\n"), field: "spec.env[0].name"},
	{name: "duplicate env", doc: pyFn("bad-env-dup", "  env:\n  - name: A\n    value: \"1\"\n  - name: A\n    value: \"2\"\n"), field: "spec.env[1]"},
	{name: "value and valueFrom", doc: pyFn("bad-env-both", "  env:\n  - name: A\n    value: \"1\"\n    valueFrom:\n      secretKeyRef:\n        name: s\n        key: k\n"), field: "spec.env[0]"},
	{name: "env from config map", doc: pyFn("ok-env-cm", "  env:\n  - name: A\n    valueFrom:\n      configMapKeyRef:\n        name: c\n        key: k\n"), valid: true},
	{name: "env from field", doc: pyFn("ok-env-field", "  env:\n  - name: A\n    valueFrom:\n      fieldRef:\n        fieldPath: metadata.name\n"), valid: true},
	{name: "env valueFrom empty", doc: pyFn("bad-env-vf-empty", "  env:\n  - name: A\n    valueFrom: {}\n"), field: "spec.env[0].valueFrom", msg: "exactly one of"},
	{name: "env valueFrom two sources", doc: pyFn("bad-env-vf-two", "  env:\n  - name: A\n    valueFrom:\n      secretKeyRef: {name: s, key: k}\n      configMapKeyRef: {name: c, key: k}\n"), field: "spec.env[0].valueFrom", msg: "exactly one of"},
	{name: "env valueFrom file", doc: pyFn("bad-env-vf-file", "  env:\n  - name: A\n    valueFrom:\n      fileKeyRef: {volumeName: v, path: p, key: k}\n"), field: "spec.env[0].valueFrom", msg: "exactly one of"},
	{name: "env secret without name", doc: pyFn("bad-env-vf-noname", "  env:\n  - name: A\n    valueFrom:\n      secretKeyRef: {key: k}\n"), field: "spec.env[0].valueFrom.secretKeyRef.name"},
	{name: "env config map with empty name", doc: pyFn("bad-env-vf-cm", "  env:\n  - name: A\n    valueFrom:\n      configMapKeyRef: {name: \"\", key: k}\n"), field: "spec.env[0].valueFrom.configMapKeyRef.name"},
	{name: "inline traversal", doc: fn("bad-trav", "  runtime: python3.12\n  entrypoint: main.handler\n  source:\n    inline:\n      files:\n        ../main.py: x\n"), field: "spec.source.inline.files"},
	{name: "inline absolute", doc: fn("bad-abs", "  runtime: python3.12\n  entrypoint: main.handler\n  source:\n    inline:\n      files:\n        /main.py: x\n"), field: "spec.source.inline.files"},
	{name: "inline empty", doc: fn("bad-inline-empty", "  runtime: python3.12\n  entrypoint: main.handler\n  source:\n    inline:\n      files: {}\n"), field: "spec.source.inline.files"},
	{name: "inline too large", doc: fn("bad-inline-big", "  runtime: python3.12\n  entrypoint: main.handler\n  source:\n    inline:\n      files:\n        a.py: "+strings.Repeat("x", 140000)+"\n        b.py: "+strings.Repeat("y", 140000)+"\n"), field: "spec.source.inline.files"},
	{name: "archive digest", doc: fn("bad-sha", "  runtime: python3.12\n  entrypoint: main.handler\n  source:\n    archive:\n      bucket: sless\n      key: k\n      sha256: ABC\n"), field: "spec.source.archive.sha256"},
	{name: "image reference", doc: fn("bad-image", "  runtime: go1.24\n  source:\n    image: \"Not An Image\"\n"), field: "spec.source.image"},
	{name: "image of a local registry", doc: fn("ok-image-local", "  runtime: go1.24\n  source:\n    image: localhost:5000/team/app:V1.0_rc\n"), valid: true},
	{name: "image by tag and digest", doc: fn("ok-image-both", "  runtime: go1.24\n  source:\n    image: registry.example.com:5000/a/b__c/d-e:1@sha256:"+sha+"\n"), valid: true},
	{name: "image of Docker Hub", doc: fn("ok-image-hub", "  runtime: go1.24\n  source:\n    image: nginx\n"), valid: true},
	{name: "image path upper case", doc: fn("bad-image-upper", "  runtime: go1.24\n  source:\n    image: registry.example.com/Team/app:1\n"), field: "spec.source.image"},
	{name: "image digest upper case", doc: fn("bad-image-digest", "  runtime: go1.24\n  source:\n    image: registry.example.com/app@sha256:"+strings.ToUpper(sha)+"\n"), field: "spec.source.image"},
	{name: "image digest short", doc: fn("bad-image-short", "  runtime: go1.24\n  source:\n    image: registry.example.com/app@sha256:abc\n"), field: "spec.source.image"},
	{name: "image with two tags", doc: fn("bad-image-tags", "  runtime: go1.24\n  source:\n    image: registry.example.com/app:1:2\n"), field: "spec.source.image"},
	{name: "image with empty tag", doc: fn("bad-image-notag", "  runtime: go1.24\n  source:\n    image: \"registry.example.com/app:\"\n"), field: "spec.source.image"},
	{name: "image with two ports", doc: fn("bad-image-ports", "  runtime: go1.24\n  source:\n    image: registry:1:2/app\n"), field: "spec.source.image"},
	// Traffic, as Knative checks a Service's traffic block.
	{name: "traffic split", doc: pyFn("ok-split", "  traffic:\n  - revisionName: ok-split-00001\n    percent: 90\n    tag: stable\n  - latestRevision: true\n    percent: 10\n    tag: canary\n"), valid: true},
	{name: "traffic pinned", doc: pyFn("ok-pin", "  traffic:\n  - revisionName: ok-pin-00002\n    percent: 100\n  - tag: next\n"), valid: true},
	{name: "traffic one revision twice", doc: pyFn("ok-twice", "  traffic:\n  - revisionName: ok-twice-00001\n    percent: 50\n  - revisionName: ok-twice-00001\n    percent: 50\n    tag: old\n"), valid: true},
	{name: "traffic sums below 100", doc: pyFn("bad-sum", "  traffic:\n  - revisionName: bad-sum-00001\n    percent: 40\n  - latestRevision: true\n    percent: 50\n"), field: "spec.traffic", msg: "want 100"},
	{name: "traffic sums above 100", doc: pyFn("bad-sum-hi", "  traffic:\n  - revisionName: bad-sum-hi-00001\n    percent: 60\n  - percent: 50\n"), field: "spec.traffic", msg: "want 100"},
	{name: "traffic of tags alone", doc: pyFn("bad-sum-zero", "  traffic:\n  - tag: a\n    revisionName: bad-sum-zero-00001\n"), field: "spec.traffic", msg: "want 100"},
	{name: "traffic percent above 100", doc: pyFn("bad-pct", "  traffic:\n  - percent: 101\n"), field: "spec.traffic[0].percent"},
	{name: "traffic percent negative", doc: pyFn("bad-pct-neg", "  traffic:\n  - percent: -10\n    revisionName: bad-pct-neg-00001\n  - percent: 110\n"), field: "spec.traffic[0].percent"},
	{name: "traffic two latest", doc: pyFn("bad-latest", "  traffic:\n  - latestRevision: true\n    percent: 50\n  - percent: 50\n    tag: b\n"), field: "spec.traffic[1]", msg: "at most one traffic target may follow the latest revision"},
	{name: "traffic latest with a revision", doc: pyFn("bad-lr", "  traffic:\n  - latestRevision: true\n    revisionName: bad-lr-00001\n    percent: 100\n"), field: "spec.traffic[0].latestRevision", msg: "latestRevision: true takes no revisionName"},
	{name: "traffic pinned without a revision", doc: pyFn("bad-lr-false", "  traffic:\n  - latestRevision: false\n    percent: 100\n"), field: "spec.traffic[0].latestRevision", msg: "latestRevision: false needs one"},
	{name: "traffic revision of another function", doc: pyFn("bad-other", "  traffic:\n  - revisionName: greeter-00001\n    percent: 100\n"), field: "spec.traffic[0].revisionName", msg: "revisionName must name a revision of this function"},
	{name: "traffic revision name not a label", doc: pyFn("bad-revname", "  traffic:\n  - revisionName: bad-revname_1\n    percent: 100\n"), field: "spec.traffic[0].revisionName"},
	{name: "traffic tag not a DNS-1035 label", doc: pyFn("bad-tag", "  traffic:\n  - percent: 100\n    tag: 1st\n"), field: "spec.traffic[0].tag"},
	{name: "traffic tag upper case", doc: pyFn("bad-tag-uc", "  traffic:\n  - percent: 100\n    tag: Canary\n"), field: "spec.traffic[0].tag"},
	{name: "traffic tag twice", doc: pyFn("bad-tag-dup", "  traffic:\n  - percent: 100\n    tag: a\n  - revisionName: bad-tag-dup-00001\n    tag: a\n"), field: "spec.traffic[1].tag", msg: "each tag may name one traffic target only"},
	{name: "traffic tag too long for the host", doc: pyFn(strings.Repeat("n", 52), "  traffic:\n  - percent: 100\n    tag: "+strings.Repeat("t", 11)+"\n"), field: "spec.traffic[0].tag", msg: "must make a DNS label of at most 63 characters"},
	{name: "traffic tag at the host's limit", doc: pyFn(strings.Repeat("n", 52), "  traffic:\n  - percent: 100\n    tag: "+strings.Repeat("t", 10)+"\n"), valid: true},
	{name: "traffic url in spec", doc: pyFn("bad-url", "  traffic:\n  - percent: 100\n    url: http://x.example.com\n"), field: "spec.traffic[0].url", msg: "url and address are set in status only"},
	{name: "traffic empty list", doc: pyFn("ok-traffic-empty", "  traffic: []\n"), valid: true},
	{name: "name upper case", doc: pyFn("Bad", ""), field: "metadata.name"},
	{name: "name starts with digit", doc: pyFn("1abc", ""), field: "metadata.name", msg: "DNS-1035"},
	{name: "name too long", doc: pyFn(strings.Repeat("a", 53), ""), field: "metadata.name", msg: "at most 52"},

	// Triggers.
	{name: "http trigger", doc: trg("ok-http", "  type: http\n"), valid: true},
	{name: "disabled trigger", doc: trg("ok-off", "  type: http\n  enabled: false\n"), valid: true},
	{name: "cron trigger", doc: trg("ok-cron", "  type: cron\n  schedule: \"*/5 9-17 * jan-jun mon-fri\"\n  timeZone: Europe/Berlin\n  preWarmSeconds: 30\n  concurrencyPolicy: Replace\n  payload:\n    a: [1, 2]\n"), valid: true},
	{name: "cron descriptor", doc: trg("ok-daily", "  type: cron\n  schedule: \"@daily\"\n"), valid: true},
	{name: "cron list", doc: trg("ok-list", "  type: cron\n  schedule: \"0,30 0 1,15 * *\"\n"), valid: true},
	{name: "queue trigger", doc: trg("ok-queue", "  type: queue\n  queue:\n    connectionSecret: amqp\n    queue: orders\n    maxRetries: 0\n"), valid: true},
	{name: "cron without schedule", doc: trg("bad-cron-none", "  type: cron\n"), field: "spec.schedule"},
	{name: "cron minute out of range", doc: trg("bad-cron-61", "  type: cron\n  schedule: \"61 * * * *\"\n"), field: "spec.schedule"},
	{name: "cron words", doc: trg("bad-cron-words", "  type: cron\n  schedule: \"not a cron\"\n"), field: "spec.schedule"},
	{name: "cron six fields", doc: trg("bad-cron-six", "  type: cron\n  schedule: \"0 0 * * * *\"\n"), field: "spec.schedule"},
	{name: "cron every", doc: trg("bad-cron-every", "  type: cron\n  schedule: \"@every 5m\"\n"), field: "spec.schedule"},
	{name: "cron step zero", doc: trg("bad-cron-step", "  type: cron\n  schedule: \"*/0 * * * *\"\n"), field: "spec.schedule"},
	{name: "cron tz prefix", doc: trg("bad-cron-tz", "  type: cron\n  schedule: \"CRON_TZ=UTC 0 * * * *\"\n"), field: "spec.schedule"},
	{name: "schedule on http", doc: trg("bad-http-sched", "  type: http\n  schedule: \"@daily\"\n"), field: "spec.schedule"},
	{name: "time zone on http", doc: trg("bad-http-tz", "  type: http\n  timeZone: Europe/Berlin\n"), field: "spec.timeZone", msg: "timeZone applies only to cron triggers"},
	{name: "pre-warm on http", doc: trg("bad-http-warm", "  type: http\n  preWarmSeconds: 30\n"), field: "spec.preWarmSeconds", msg: "preWarmSeconds applies only to cron triggers"},
	{name: "concurrency policy on http", doc: trg("bad-http-policy", "  type: http\n  concurrencyPolicy: Allow\n"), field: "spec.concurrencyPolicy", msg: "concurrencyPolicy applies only to cron triggers"},
	{name: "queue missing", doc: trg("bad-queue", "  type: queue\n"), field: "spec.queue"},
	{name: "queue on http", doc: trg("bad-http-queue", "  type: http\n  queue:\n    connectionSecret: a\n    queue: b\n"), field: "spec.queue"},
	{name: "queue prefetch", doc: trg("bad-prefetch", "  type: queue\n  queue:\n    connectionSecret: amqp\n    queue: orders\n    prefetch: 0\n"), field: "spec.queue.prefetch"},
	{name: "unknown type", doc: trg("bad-type", "  type: sqs\n"), field: "spec.type"},
	{name: "starting deadline on http", doc: trg("bad-deadline-http", "  type: http\n  startingDeadlineSeconds: 0\n"), field: "spec.startingDeadlineSeconds"},
	{name: "starting deadline on cron", doc: trg("bad-deadline-cron", "  type: cron\n  schedule: \"@daily\"\n  startingDeadlineSeconds: 90000\n"), field: "spec.startingDeadlineSeconds"},
	{name: "connection secret not a name", doc: trg("bad-conn-name", "  type: queue\n  queue:\n    connectionSecret: Amqp_URL\n    queue: orders\n"), field: "spec.queue.connectionSecret"},
	{name: "connection secret too long", doc: trg("bad-conn-long", "  type: queue\n  queue:\n    connectionSecret: "+strings.Repeat("a", 254)+"\n    queue: orders\n"), field: "spec.queue.connectionSecret"},
	{name: "dead-letter queue too long", doc: trg("bad-dlq-long", "  type: queue\n  queue:\n    connectionSecret: amqp\n    queue: orders\n    deadLetterQueue: "+strings.Repeat("d", 256)+"\n"), field: "spec.queue.deadLetterQueue"},
	{name: "queue name at its limit", doc: trg("ok-queue-long", "  type: queue\n  queue:\n    connectionSecret: amqp\n    queue: "+strings.Repeat("q", 239)+"\n"), valid: true},
	{name: "queue name past its limit", doc: trg("bad-queue-long", "  type: queue\n  queue:\n    connectionSecret: amqp\n    queue: "+strings.Repeat("q", 240)+"\n"), field: "spec.queue.queue", msg: "239 bytes"},
	{name: "queue name past its limit in bytes", doc: trg("bad-queue-utf8", "  type: queue\n  queue:\n    connectionSecret: amqp\n    queue: "+strings.Repeat("ü", 120)+"\n"), field: "spec.queue.queue", msg: "239 bytes"},
	{name: "queue name reserved", doc: trg("bad-queue-amq", "  type: queue\n  queue:\n    connectionSecret: amqp\n    queue: amq.orders\n"), field: "spec.queue.queue", msg: "amq."},
	{name: "dead letters back into the queue", doc: trg("bad-dlq-same", "  type: queue\n  queue:\n    connectionSecret: amqp\n    queue: orders\n    deadLetterQueue: orders\n"), field: "spec.queue.deadLetterQueue", msg: "must differ"},
	{name: "dead-letter queue reserved", doc: trg("bad-dlq-amq", "  type: queue\n  queue:\n    connectionSecret: amqp\n    queue: orders\n    deadLetterQueue: amq.dead\n"), field: "spec.queue.deadLetterQueue"},
	{name: "queue with dead letters", doc: trg("ok-dlq", "  type: queue\n  queue:\n    connectionSecret: amqp.prod\n    queue: orders\n    deadLetterQueue: orders.dead\n"), valid: true},
	{name: "nats", doc: trg("ok-nats", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORDERS\n    subject: orders.>\n    durable: worker\n    deadLetterSubject: dead.orders\n"), valid: true},
	{name: "nats wildcard token", doc: trg("ok-nats-star", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORDERS\n    subject: orders.*.eu\n"), valid: true},
	{name: "nats missing", doc: trg("bad-nats", "  type: nats\n"), field: "spec.nats"},
	{name: "nats on queue", doc: trg("bad-queue-nats", "  type: queue\n  queue:\n    connectionSecret: a\n    queue: b\n  nats:\n    connectionSecret: a\n    stream: S\n    subject: s\n"), field: "spec.nats"},
	{name: "nats without stream", doc: trg("bad-nats-nostream", "  type: nats\n  nats:\n    connectionSecret: nats\n    subject: orders\n"), field: "spec.nats.stream"},
	{name: "nats stream with a dot", doc: trg("bad-nats-stream", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORD.ERS\n    subject: orders\n"), field: "spec.nats.stream"},
	{name: "nats stream with a space", doc: trg("bad-nats-space", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: \"OR DERS\"\n    subject: orders\n"), field: "spec.nats.stream"},
	{name: "nats durable with a wildcard", doc: trg("bad-nats-durable", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORDERS\n    subject: orders\n    durable: \"w*\"\n"), field: "spec.nats.durable"},
	{name: "nats subject > not last", doc: trg("bad-nats-gt", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORDERS\n    subject: orders.>.eu\n"), field: "spec.nats.subject"},
	{name: "nats subject empty token", doc: trg("bad-nats-empty", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORDERS\n    subject: orders..eu\n"), field: "spec.nats.subject"},
	{name: "nats subject partial wildcard", doc: trg("bad-nats-partial", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORDERS\n    subject: orders.eu*\n"), field: "spec.nats.subject"},
	{name: "nats subject too long", doc: trg("bad-nats-long", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORDERS\n    subject: "+strings.Repeat("s", 256)+"\n"), field: "spec.nats.subject"},
	{name: "nats dead letters with a wildcard", doc: trg("bad-nats-dlqwild", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORDERS\n    subject: orders\n    deadLetterSubject: dead.*\n"), field: "spec.nats.deadLetterSubject"},
	{name: "nats dead letters the subject", doc: trg("bad-nats-dlqsame", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORDERS\n    subject: orders.eu\n    deadLetterSubject: orders.eu\n"), field: "spec.nats.deadLetterSubject", msg: "must differ"},
	{name: "nats dead letters matched by the filter", doc: trg("bad-nats-dlqmatch", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORDERS\n    subject: orders.>\n    deadLetterSubject: orders.dead\n"), field: "spec.nats.deadLetterSubject", goOnly: true},
	{name: "nats prefetch", doc: trg("bad-nats-prefetch", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORDERS\n    subject: orders\n    prefetch: 1001\n"), field: "spec.nats.prefetch"},
	{name: "nats retries", doc: trg("bad-nats-retries", "  type: nats\n  nats:\n    connectionSecret: nats\n    stream: ORDERS\n    subject: orders\n    maxRetries: -1\n"), field: "spec.nats.maxRetries"},
	{name: "nats connection secret", doc: trg("bad-nats-conn", "  type: nats\n  nats:\n    connectionSecret: NATS_URL\n    stream: ORDERS\n    subject: orders\n"), field: "spec.nats.connectionSecret"},
	{name: "kafka", doc: trg("ok-kafka", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: orders.eu_1-x\n    group: workers.1\n    deadLetterTopic: orders.dead\n    prefetch: 100\n    concurrency: 8\n"), valid: true},
	{name: "kafka missing", doc: trg("bad-kafka", "  type: kafka\n"), field: "spec.kafka"},
	{name: "kafka on nats", doc: trg("bad-nats-kafka", "  type: nats\n  nats:\n    connectionSecret: a\n    stream: S\n    subject: s\n  kafka:\n    connectionSecret: a\n    topic: t\n"), field: "spec.kafka"},
	{name: "kafka without topic", doc: trg("bad-kafka-notopic", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n"), field: "spec.kafka.topic"},
	{name: "kafka without secret", doc: trg("bad-kafka-nosecret", "  type: kafka\n  kafka:\n    topic: orders\n"), field: "spec.kafka.connectionSecret"},
	{name: "kafka secret not a name", doc: trg("bad-kafka-secret", "  type: kafka\n  kafka:\n    connectionSecret: Kafka_Brokers\n    topic: orders\n"), field: "spec.kafka.connectionSecret"},
	{name: "kafka topic with a slash", doc: trg("bad-kafka-topic", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: orders/eu\n"), field: "spec.kafka.topic"},
	{name: "kafka topic with a space", doc: trg("bad-kafka-space", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: \"or ders\"\n"), field: "spec.kafka.topic"},
	{name: "kafka topic dot", doc: trg("bad-kafka-dot", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: \".\"\n"), field: "spec.kafka.topic", msg: "must not be . or .."},
	{name: "kafka topic dot dot", doc: trg("bad-kafka-dotdot", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: \"..\"\n"), field: "spec.kafka.topic", msg: "must not be . or .."},
	{name: "kafka topic too long", doc: trg("bad-kafka-long", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: "+strings.Repeat("t", 250)+"\n    deadLetterTopic: dead\n"), field: "spec.kafka.topic"},
	{name: "kafka topic too long for its dead letters", doc: trg("bad-kafka-dlqroom", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: "+strings.Repeat("t", 246)+"\n"), field: "spec.kafka.topic", msg: "leaving room for <topic>.dlq"},
	{name: "kafka long topic with its dead-letter topic", doc: trg("ok-kafka-long", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: "+strings.Repeat("t", 249)+"\n    deadLetterTopic: dead\n"), valid: true},
	{name: "kafka group with a colon", doc: trg("bad-kafka-group", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: orders\n    group: \"a:b\"\n"), field: "spec.kafka.group"},
	{name: "kafka group too long", doc: trg("bad-kafka-grouplong", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: orders\n    group: "+strings.Repeat("g", 250)+"\n"), field: "spec.kafka.group"},
	{name: "kafka dead letters the topic", doc: trg("bad-kafka-dlqsame", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: orders\n    deadLetterTopic: orders\n"), field: "spec.kafka.deadLetterTopic", msg: "must differ"},
	{name: "kafka dead-letter topic with a star", doc: trg("bad-kafka-dlqstar", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: orders\n    deadLetterTopic: \"dead*\"\n"), field: "spec.kafka.deadLetterTopic"},
	{name: "kafka dead-letter topic dot", doc: trg("bad-kafka-dlqdot", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: orders\n    deadLetterTopic: \"..\"\n"), field: "spec.kafka.deadLetterTopic", msg: "must not be . or .."},
	{name: "kafka prefetch", doc: trg("bad-kafka-prefetch", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: orders\n    prefetch: 0\n"), field: "spec.kafka.prefetch"},
	{name: "kafka concurrency", doc: trg("bad-kafka-conc", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: orders\n    concurrency: 101\n"), field: "spec.kafka.concurrency"},
	{name: "kafka retries", doc: trg("bad-kafka-retries", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: orders\n    maxRetries: 101\n"), field: "spec.kafka.maxRetries"},
	{name: "kafka backoff", doc: trg("bad-kafka-backoff", "  type: kafka\n  kafka:\n    connectionSecret: kafka\n    topic: orders\n    backoffSeconds: 0\n"), field: "spec.kafka.backoffSeconds"},
	{name: "kafka schedule", doc: trg("bad-kafka-sched", "  type: kafka\n  schedule: \"@daily\"\n  kafka:\n    connectionSecret: kafka\n    topic: orders\n"), field: "spec.schedule"},
	{name: "mqtt", doc: trg("ok-mqtt", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: sensors/+/temp\n    shareGroup: workers\n    clientID: sless-worker-1\n    deadLetterTopic: dead/sensors\n    maxRetries: 5\n"), valid: true},
	{name: "mqtt multi-level wildcard", doc: trg("ok-mqtt-hash", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: \"#\"\n"), valid: true},
	{name: "mqtt empty levels", doc: trg("ok-mqtt-empty", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: /a//b\n"), valid: true},
	{name: "mqtt missing", doc: trg("bad-mqtt", "  type: mqtt\n"), field: "spec.mqtt"},
	{name: "mqtt on nats", doc: trg("bad-nats-mqtt", "  type: nats\n  nats:\n    connectionSecret: a\n    stream: S\n    subject: s\n  mqtt:\n    connectionSecret: a\n    topic: t\n"), field: "spec.mqtt"},
	{name: "mqtt without topic", doc: trg("bad-mqtt-notopic", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n"), field: "spec.mqtt.topic"},
	{name: "mqtt # not last", doc: trg("bad-mqtt-hash", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a/#/b\n"), field: "spec.mqtt.topic"},
	{name: "mqtt partial +", doc: trg("bad-mqtt-plus", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a/b+/c\n"), field: "spec.mqtt.topic"},
	{name: "mqtt partial #", doc: trg("bad-mqtt-parthash", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a/b#\n"), field: "spec.mqtt.topic"},
	{name: "mqtt topic too long", doc: trg("bad-mqtt-long", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: "+strings.Repeat("t", 1025)+"\n"), field: "spec.mqtt.topic"},
	{name: "mqtt topic a shared subscription", doc: trg("bad-mqtt-share", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: $share/g/a\n"), field: "spec.mqtt.topic", msg: "set shareGroup"},
	{name: "mqtt share group with a slash", doc: trg("bad-mqtt-group", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a\n    shareGroup: g/h\n"), field: "spec.mqtt.shareGroup"},
	{name: "mqtt share group with a wildcard", doc: trg("bad-mqtt-groupw", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a\n    shareGroup: g+\n"), field: "spec.mqtt.shareGroup"},
	{name: "mqtt share group too long", doc: trg("bad-mqtt-grouplong", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a\n    shareGroup: "+strings.Repeat("g", 129)+"\n"), field: "spec.mqtt.shareGroup"},
	{name: "mqtt client id with a space", doc: trg("bad-mqtt-client", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a\n    clientID: \"a b\"\n"), field: "spec.mqtt.clientID"},
	{name: "mqtt client id too long", doc: trg("bad-mqtt-clientlong", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a\n    clientID: "+strings.Repeat("c", 129)+"\n"), field: "spec.mqtt.clientID"},
	{name: "mqtt dead letters with a wildcard", doc: trg("bad-mqtt-dlqwild", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a\n    deadLetterTopic: dead/+\n"), field: "spec.mqtt.deadLetterTopic"},
	{name: "mqtt dead letters under $", doc: trg("bad-mqtt-dlqsys", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a\n    deadLetterTopic: $SYS/dead\n"), field: "spec.mqtt.deadLetterTopic"},
	{name: "mqtt dead letters the topic", doc: trg("bad-mqtt-dlqsame", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a/b\n    deadLetterTopic: a/b\n"), field: "spec.mqtt.deadLetterTopic", msg: "must differ"},
	{name: "mqtt dead letters matched by the filter", doc: trg("bad-mqtt-dlqmatch", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a/#\n    deadLetterTopic: a/dead\n"), field: "spec.mqtt.deadLetterTopic", goOnly: true},
	{name: "mqtt concurrency", doc: trg("bad-mqtt-conc", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a\n    concurrency: 101\n"), field: "spec.mqtt.concurrency"},
	{name: "mqtt backoff", doc: trg("bad-mqtt-backoff", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a\n    backoffSeconds: 0\n"), field: "spec.mqtt.backoffSeconds"},
	{name: "mqtt prefetch", doc: trg("bad-mqtt-prefetch", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a\n    prefetch: 0\n"), field: "spec.mqtt.prefetch"},
	{name: "mqtt retries", doc: trg("bad-mqtt-retries", "  type: mqtt\n  mqtt:\n    connectionSecret: mqtt\n    topic: a\n    maxRetries: 101\n"), field: "spec.mqtt.maxRetries"},
	{name: "mqtt connection secret", doc: trg("bad-mqtt-conn", "  type: mqtt\n  mqtt:\n    connectionSecret: MQTT_URL\n    topic: a\n"), field: "spec.mqtt.connectionSecret"},
	{name: "pre-warm above", doc: trg("bad-prewarm", "  type: cron\n  schedule: \"@hourly\"\n  preWarmSeconds: 4000\n"), field: "spec.preWarmSeconds"},
	{name: "bad function ref", doc: "apiVersion: sless.dev/v1alpha1\nkind: Trigger\nmetadata:\n  name: bad-ref\nspec:\n  function: Bad_Name\n  type: http\n", field: "spec.function"},
	{name: "time zone with offset", doc: trg("ok-tz-gmt", "  type: cron\n  schedule: \"@daily\"\n  timeZone: Etc/GMT+5\n"), valid: true},
	{name: "time zone of three parts", doc: trg("ok-tz-three", "  type: cron\n  schedule: \"@daily\"\n  timeZone: America/Argentina/ComodRivadavia\n"), valid: true},
	{name: "time zone Local", doc: trg("bad-tz-local", "  type: cron\n  schedule: \"@daily\"\n  timeZone: Local\n"), field: "spec.timeZone", msg: "not Local"},
	{name: "time zone local", doc: trg("bad-tz-lower", "  type: cron\n  schedule: \"@daily\"\n  timeZone: local\n"), field: "spec.timeZone", msg: "not Local"},
	{name: "time zone part too long", doc: trg("bad-tz-long", "  type: cron\n  schedule: \"@daily\"\n  timeZone: Europe/Berlin_and_Brandenburg\n"), field: "spec.timeZone"},
	{name: "time zone part starts with a dash", doc: trg("bad-tz-dash", "  type: cron\n  schedule: \"@daily\"\n  timeZone: Etc/-5\n"), field: "spec.timeZone"},
	{name: "unknown time zone", doc: trg("bad-tz", "  type: cron\n  schedule: \"@daily\"\n  timeZone: Mars/Olympus_Mons\n"), field: "spec.timeZone", goOnly: true},

	// FunctionJobs.
	{name: "job", doc: job("ok-job", "  function: greeter\n  runID: 3\n  payload: {\"x\": 1}\n"), valid: true},
	{name: "job not run", doc: job("ok-job-zero", "  function: greeter\n"), valid: true},
	{name: "job negative run", doc: job("bad-run", "  function: greeter\n  runID: -1\n"), field: "spec.runID"},
	// Payloads reach runs in an environment variable, which Linux caps;
	// the schema cannot measure a free-form value (the controller reports
	// it), the REST API refuses it.
	{name: "job payload at the limit", doc: job("ok-job-big", "  function: greeter\n  payload: "+payloadOfSize(v1.MaxPayloadBytes)+"\n"), valid: true},
	{name: "job payload over the limit", doc: job("bad-job-big", "  function: greeter\n  payload: "+payloadOfSize(v1.MaxPayloadBytes+1)+"\n"), field: "spec.payload", goOnly: true},
	{name: "cron payload over the limit", doc: trg("bad-cron-big", "  type: cron\n  schedule: \"@daily\"\n  payload: "+payloadOfSize(v1.MaxPayloadBytes+1)+"\n"), field: "spec.payload", goOnly: true},
	{name: "job without function", doc: job("bad-job-fn", "  runID: 1\n"), field: "spec.function"},
	{name: "job timeout", doc: job("bad-job-to", "  function: greeter\n  timeoutSeconds: 0\n"), field: "spec.timeoutSeconds"},

	// SlessServices: a Function's build fields, a service's scale.
	{name: "service minimal", doc: pySvc("ok-svc-min", ""), valid: true},
	{name: "service scale to zero, max, concurrency", doc: pySvc("ok-svc-scale", "  minScale: 0\n  maxScale: 3\n  containerConcurrency: 50\n  timeoutSeconds: 900\n"), valid: true},
	{name: "service prebuilt image", doc: svc("ok-svc-img", "  runtime: nodejs22\n  source:\n    image: registry.example.com/web:1\n"), valid: true},
	{name: "service max below min", doc: pySvc("bad-svc-max", "  minScale: 3\n  maxScale: 2\n"), field: "spec.maxScale", msg: "maxScale must be greater than or equal to minScale"},
	{name: "service negative minScale", doc: pySvc("bad-svc-min", "  minScale: -1\n"), field: "spec.minScale"},
	{name: "service maxScale zero", doc: pySvc("bad-svc-max0", "  maxScale: 0\n"), field: "spec.maxScale"},
	{name: "service concurrency too high", doc: pySvc("bad-svc-cc", "  containerConcurrency: 1001\n"), field: "spec.containerConcurrency"},
	{name: "service timeout too long", doc: pySvc("bad-svc-to", "  timeoutSeconds: 901\n"), field: "spec.timeoutSeconds"},
	{name: "service memory too small", doc: pySvc("bad-svc-mem", "  memoryMB: 32\n"), field: "spec.memoryMB"},
	{name: "service without entrypoint", doc: svc("bad-svc-ep", "  runtime: python3.12\n"+pyFiles), field: "spec.entrypoint"},
	{name: "service unknown runtime", doc: svc("bad-svc-rt", "  runtime: ruby3\n  entrypoint: app.app\n"+pyFiles), field: "spec.runtime"},
	{name: "service reserved env", doc: pySvc("bad-svc-env", "  env:\n  - name: SLESS_MODE\n    value: x\n"), field: "spec.env[0].name"},
	{name: "service two sources", doc: svc("bad-svc-src", "  runtime: python3.12\n  entrypoint: app.app\n  source:\n    image: web:1\n    inline:\n      files:\n        app.py: x\n"), field: "spec.source", msg: "exactly one of inline, archive or image"},
	{name: "service name too long", doc: pySvc(strings.Repeat("s", 53), ""), field: "metadata.name", msg: "at most 52"},
	{name: "service traffic split", doc: pySvc("ok-svc-split", "  traffic:\n  - revisionName: ok-svc-split-00001\n    percent: 50\n  - percent: 50\n    tag: next\n"), valid: true},
	{name: "service traffic sum", doc: pySvc("bad-svc-sum", "  traffic:\n  - percent: 99\n"), field: "spec.traffic", msg: "want 100"},
	{name: "service traffic revision of another", doc: pySvc("bad-svc-other", "  traffic:\n  - revisionName: web-00001\n    percent: 100\n"), field: "spec.traffic[0].revisionName", msg: "revisionName must name a revision of this service"},

	// IoTDevices.
	{name: "device minimal", doc: dev("ok-dev", "  {}\n"), valid: true},
	{name: "device full", doc: dev("ok-dev-full", "  function: greeter\n  enabled: false\n  attributes:\n    room: kitchen\n    fw.version: 1.2.3\n"), valid: true},
	{name: "device trigger", doc: dev("ok-dev-trg", "  trigger: sensors\n"), valid: true},
	{name: "device function and trigger", doc: dev("bad-dev-both", "  function: greeter\n  trigger: sensors\n"), field: "spec.trigger", msg: "not both"},
	{name: "device bad function", doc: dev("bad-dev-fn", "  function: 1greeter\n"), field: "spec.function"},
	{name: "device bad trigger", doc: dev("bad-dev-trg", "  trigger: Sensors\n"), field: "spec.trigger"},
	{name: "device long trigger", doc: dev("bad-dev-trg-long", "  trigger: "+strings.Repeat("t", 53)+"\n"), field: "spec.trigger"},
	{name: "device bad attribute name", doc: dev("bad-dev-attr", "  attributes:\n    \"a b\": x\n"), field: "spec.attributes", msg: "attribute names"},
	{name: "device attribute name ends in a dot", doc: dev("bad-dev-attr-dot", "  attributes:\n    room.: x\n"), field: "spec.attributes", msg: "attribute names"},
	{name: "device long attribute value", doc: dev("bad-dev-attr-long", "  attributes:\n    room: "+strings.Repeat("x", 257)+"\n"), field: "spec.attributes", msg: "at most 256 characters"},
	{name: "device attribute value at the bound", doc: dev("ok-dev-attr-256", "  attributes:\n    room: "+strings.Repeat("x", 256)+"\n"), valid: true},
	{name: "device too many attributes", doc: dev("bad-dev-attrs", "  attributes:\n"+manyAttributes(33)), field: "spec.attributes"},
	{name: "device name too long", doc: dev(strings.Repeat("d", 64), "  {}\n"), field: "metadata.name", msg: "at most 63"},
	{name: "device name with a dot", doc: dev("dev.one", "  {}\n"), field: "metadata.name", msg: "DNS-1123 label"},

	// Resources and placement.
	{name: "resources", doc: pyFn("ok-res", "  resources:\n    requests:\n      cpu: 250m\n      memory: 256Mi\n      ephemeral-storage: 1Gi\n    limits:\n      cpu: 1\n      memory: 512Mi\n      nvidia.com/gpu: 1\n"), valid: true},
	{name: "gpu request equal to limit", doc: pyFn("ok-gpu-req", "  resources:\n    requests:\n      nvidia.com/gpu: 2\n    limits:\n      nvidia.com/gpu: \"2\"\n"), valid: true},
	{name: "shorthands agreeing", doc: pyFn("ok-short", "  memoryMB: 256\n  cpu: 500m\n  resources:\n    requests:\n      cpu: \"0.5\"\n    limits:\n      cpu: 1\n"), valid: true},
	{name: "gpu request without limit", doc: pyFn("bad-gpu-req", "  resources:\n    requests:\n      nvidia.com/gpu: 1\n"), field: "spec.resources.requests[nvidia.com/gpu]", msg: "extended resources are set in limits"},
	{name: "gpu request other than limit", doc: pyFn("bad-gpu-ne", "  resources:\n    requests:\n      nvidia.com/gpu: 1\n    limits:\n      nvidia.com/gpu: 2\n"), field: "spec.resources.requests[nvidia.com/gpu]", msg: "extended resources are set in limits"},
	{name: "fractional gpu", doc: pyFn("bad-gpu-frac", "  resources:\n    limits:\n      nvidia.com/gpu: 500m\n"), field: "spec.resources.limits[nvidia.com/gpu]", msg: "extended resources are whole numbers"},
	{name: "request over limit", doc: pyFn("bad-req-lim", "  resources:\n    requests:\n      cpu: 2\n    limits:\n      cpu: 1\n"), field: "spec.resources.requests[cpu]", msg: "a request must not exceed its limit"},
	{name: "unknown resource", doc: pyFn("bad-res-name", "  resources:\n    limits:\n      gpu: 1\n"), field: "spec.resources.limits[gpu]", msg: "resource names are cpu, memory, ephemeral-storage or an extended resource"},
	{name: "kubernetes.io resource", doc: pyFn("bad-res-k8s", "  resources:\n    limits:\n      kubernetes.io/foo: 1\n"), field: "spec.resources.limits[kubernetes.io/foo]", msg: "resource names are cpu, memory"},
	{name: "negative quantity", doc: pyFn("bad-res-neg", "  resources:\n    requests:\n      cpu: -1\n"), field: "spec.resources.requests[cpu]", msg: "must not be negative"},
	{name: "memory limit too small", doc: pyFn("bad-res-mem", "  resources:\n    limits:\n      memory: 32Mi\n"), field: "spec.resources.limits[memory]", msg: "at least 64Mi"},
	{name: "memoryMB against resources", doc: pyFn("bad-short-mem", "  memoryMB: 128\n  resources:\n    limits:\n      memory: 1Gi\n"), field: "spec.memoryMB", msg: "set memory in one place only"},
	{name: "cpu against resources", doc: pyFn("bad-short-cpu", "  cpu: 500m\n  resources:\n    requests:\n      cpu: 1\n"), field: "spec.cpu", msg: "cpu sets the CPU request"},
	{name: "cpu above its limit", doc: pyFn("bad-short-cpulim", "  cpu: 2\n  resources:\n    limits:\n      cpu: 1\n"), field: "spec.cpu", msg: "cpu sets the CPU request"},
	{name: "service memoryMB against resources", doc: pySvc("bad-svc-short", "  memoryMB: 256\n  resources:\n    requests:\n      memory: 128Mi\n"), field: "spec.memoryMB", msg: "set memory in one place only"},
	{name: "placement", doc: pyFn("ok-place", "  nodeSelector:\n    kubernetes.io/arch: amd64\n    gpu: \"\"\n  tolerations:\n  - key: gpu\n    operator: Exists\n    effect: NoSchedule\n  - key: spot\n    value: \"true\"\n    effect: NoExecute\n    tolerationSeconds: 30\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions:\n          - key: zone\n            operator: In\n            values: [a, b]\n  priorityClassName: batch-low\n  runtimeClassName: gvisor\n"), valid: true},
	{name: "node selector key", doc: pyFn("bad-ns-key", "  nodeSelector:\n    \"a b\": x\n"), field: "spec.nodeSelector[a b]", goOnly: true},
	{name: "node selector value", doc: pyFn("bad-ns-val", "  nodeSelector:\n    zone: \"-a\"\n"), field: "spec.nodeSelector[zone]", goOnly: true},
	{name: "toleration operator", doc: pyFn("bad-tol-op", "  tolerations:\n  - key: a\n    operator: In\n"), field: "spec.tolerations[0].operator", msg: "operator is Exists or Equal"},
	{name: "toleration exists with value", doc: pyFn("bad-tol-val", "  tolerations:\n  - key: a\n    operator: Exists\n    value: b\n"), field: "spec.tolerations[0].value", msg: "operator Exists takes no value"},
	{name: "toleration effect", doc: pyFn("bad-tol-eff", "  tolerations:\n  - key: a\n    effect: Never\n"), field: "spec.tolerations[0].effect", msg: "effect is NoSchedule"},
	{name: "toleration seconds", doc: pyFn("bad-tol-sec", "  tolerations:\n  - key: a\n    effect: NoSchedule\n    tolerationSeconds: 5\n"), field: "spec.tolerations[0].tolerationSeconds", msg: "NoExecute effect only"},
	{name: "node affinity without terms", doc: pyFn("bad-aff", "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms: []\n"), field: "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", msg: "at least one nodeSelectorTerm"},
	{name: "priority class", doc: pyFn("bad-prio", "  priorityClassName: Low\n"), field: "spec.priorityClassName"},
	{name: "runtime class", doc: pyFn("bad-rtc", "  runtimeClassName: \"gVisor\"\n"), field: "spec.runtimeClassName"},

	// Volumes.
	{name: "volumes", doc: pyFn("ok-vol", vols(
		"  - name: db\n    mountPath: /etc/db\n    secret:\n      secretName: db-creds\n      defaultMode: 288\n      items:\n      - key: password\n        path: conf/pw\n        mode: 256\n",
		"  - name: cfg\n    mountPath: /etc/app\n    configMap:\n      name: app.settings\n",
		"  - name: scratch\n    mountPath: /tmp\n    emptyDir:\n      medium: Memory\n      sizeLimit: 64Mi\n",
		"  - name: data\n    mountPath: /var/lib/data\n    persistentVolumeClaim:\n      claimName: data\n      readOnly: true\n")), valid: true},
	{name: "service volume", doc: pySvc("ok-svc-vol", vols("  - name: cache\n    mountPath: /cache\n    emptyDir: {}\n")), valid: true},
	{name: "volume without source", doc: pyFn("bad-vol-none", vols("  - name: a\n    mountPath: /a\n")), field: "spec.volumes[0]", msg: "exactly one of secret, configMap, emptyDir or persistentVolumeClaim"},
	{name: "volume with two sources", doc: pyFn("bad-vol-two", vols("  - name: a\n    mountPath: /a\n    emptyDir: {}\n    secret:\n      secretName: s\n")), field: "spec.volumes[0]", msg: "exactly one of"},
	{name: "volume name not a label", doc: pyFn("bad-vol-name", vols("  - name: My_Vol\n    mountPath: /a\n    emptyDir: {}\n")), field: "spec.volumes[0].name"},
	{name: "volume names twice", doc: pyFn("bad-vol-dup", vols("  - name: a\n    mountPath: /a\n    emptyDir: {}\n", "  - name: a\n    mountPath: /b\n    emptyDir: {}\n")), field: "spec.volumes[1]", msg: "Duplicate value"},
	{name: "mount path relative", doc: pyFn("bad-mp-rel", vols("  - name: a\n    mountPath: etc/app\n    emptyDir: {}\n")), field: "spec.volumes[0].mountPath", msg: "absolute, clean path"},
	{name: "mount path root", doc: pyFn("bad-mp-root", vols("  - name: a\n    mountPath: /\n    emptyDir: {}\n")), field: "spec.volumes[0].mountPath"},
	{name: "mount path not clean", doc: pyFn("bad-mp-dots", vols("  - name: a\n    mountPath: /data/../etc\n    emptyDir: {}\n")), field: "spec.volumes[0].mountPath", msg: "absolute, clean path"},
	{name: "mount path trailing slash", doc: pyFn("bad-mp-slash", vols("  - name: a\n    mountPath: /data/\n    emptyDir: {}\n")), field: "spec.volumes[0].mountPath", msg: "absolute, clean path"},
	{name: "mount path over the code", doc: pyFn("bad-mp-sless", vols("  - name: a\n    mountPath: /sless/function/data\n    emptyDir: {}\n")), field: "spec.volumes[0].mountPath", msg: "must not cover the runtime's own paths"},
	{name: "mount path in /dev", doc: pyFn("bad-mp-dev", vols("  - name: a\n    mountPath: /dev/shm\n    emptyDir: {}\n")), field: "spec.volumes[0].mountPath", msg: "must not cover the runtime's own paths"},
	{name: "mount path over the interpreter", doc: pyFn("bad-mp-usr", vols("  - name: a\n    mountPath: /usr/local\n    emptyDir: {}\n")), field: "spec.volumes[0].mountPath", msg: "must not cover the runtime's own paths"},
	{name: "mount path over /etc", doc: pyFn("bad-mp-etc", vols("  - name: a\n    mountPath: /etc\n    configMap:\n      name: c\n")), field: "spec.volumes[0].mountPath", msg: "must not cover the runtime's own paths"},
	{name: "mount path under a system dir", doc: pyFn("ok-mp-share", vols("  - name: a\n    mountPath: /usr/share/app\n    emptyDir: {}\n")), valid: true},
	{name: "mount paths overlap", doc: pyFn("bad-mp-overlap", vols("  - name: a\n    mountPath: /data\n    emptyDir: {}\n", "  - name: b\n    mountPath: /data/cache\n    emptyDir: {}\n")), field: "spec.volumes[1].mountPath", msg: "must not overlap"},
	{name: "mount paths equal", doc: pyFn("bad-mp-same", vols("  - name: a\n    mountPath: /data\n    emptyDir: {}\n", "  - name: b\n    mountPath: /data\n    secret:\n      secretName: s\n")), field: "spec.volumes[1].mountPath", msg: "must not overlap"},
	{name: "mount paths sharing a prefix", doc: pyFn("ok-mp-prefix", vols("  - name: a\n    mountPath: /data\n    emptyDir: {}\n", "  - name: b\n    mountPath: /data2\n    emptyDir: {}\n")), valid: true},
	{name: "secret name not a name", doc: pyFn("bad-vol-secret", vols("  - name: a\n    mountPath: /a\n    secret:\n      secretName: DB_Creds\n")), field: "spec.volumes[0].secret.secretName"},
	{name: "config map without name", doc: pyFn("bad-vol-cm", vols("  - name: a\n    mountPath: /a\n    configMap: {}\n")), field: "spec.volumes[0].configMap.name"},
	{name: "default mode above 0777", doc: pyFn("bad-vol-mode", vols("  - name: a\n    mountPath: /a\n    secret:\n      secretName: s\n      defaultMode: 512\n")), field: "spec.volumes[0].secret.defaultMode"},
	{name: "item path absolute", doc: pyFn("bad-item-abs", vols("  - name: a\n    mountPath: /a\n    secret:\n      secretName: s\n      items:\n      - key: k\n        path: /x\n")), field: "spec.volumes[0].secret.items[0].path", msg: "path must be relative"},
	{name: "item path escapes", doc: pyFn("bad-item-dots", vols("  - name: a\n    mountPath: /a\n    configMap:\n      name: c\n      items:\n      - key: k\n        path: ../x\n")), field: "spec.volumes[0].configMap.items[0].path", msg: "path must be relative"},
	{name: "item key", doc: pyFn("bad-item-key", vols("  - name: a\n    mountPath: /a\n    secret:\n      secretName: s\n      items:\n      - key: a/b\n        path: x\n")), field: "spec.volumes[0].secret.items[0].key"},
	{name: "item mode negative", doc: pyFn("bad-item-mode", vols("  - name: a\n    mountPath: /a\n    secret:\n      secretName: s\n      items:\n      - key: k\n        path: x\n        mode: -1\n")), field: "spec.volumes[0].secret.items[0].mode"},
	{name: "emptyDir medium", doc: pyFn("bad-ed-medium", vols("  - name: a\n    mountPath: /a\n    emptyDir:\n      medium: HugePages\n")), field: "spec.volumes[0].emptyDir.medium"},
	{name: "emptyDir size zero", doc: pyFn("bad-ed-size", vols("  - name: a\n    mountPath: /a\n    emptyDir:\n      sizeLimit: \"0\"\n")), field: "spec.volumes[0].emptyDir.sizeLimit", msg: "sizeLimit must be a quantity greater than zero"},
	{name: "claim name", doc: pyFn("bad-pvc-name", vols("  - name: a\n    mountPath: /a\n    persistentVolumeClaim:\n      claimName: \"\"\n")), field: "spec.volumes[0].persistentVolumeClaim.claimName"},
	{name: "service mount path over the code", doc: pySvc("bad-svc-mp", vols("  - name: a\n    mountPath: /sless\n    emptyDir: {}\n")), field: "spec.volumes[0].mountPath", msg: "must not cover the runtime's own paths"},
	{name: "egress none", doc: pyFn("ok-egress-none", "  network:\n    egress: none\n"), valid: true},
	{name: "egress all", doc: pyFn("ok-egress-all", "  network:\n    egress: all\n"), valid: true},
	{name: "egress listed", doc: pyFn("ok-egress-listed", "  network:\n    egress: listed\n    allow:\n    - cidr: 10.0.0.0/8\n      ports:\n      - port: 5432\n      - port: 53\n        protocol: UDP\n    - cidr: 2001:db8::/32\n    - ports:\n      - port: 443\n"), valid: true},
	{name: "egress unknown", doc: pyFn("bad-egress", "  network:\n    egress: some\n"), field: "spec.network.egress"},
	{name: "egress listed without allow", doc: pyFn("bad-egress-empty", "  network:\n    egress: listed\n"), field: "spec.network.allow", msg: "egress: listed takes a non-empty allow list"},
	{name: "allow without listed", doc: pyFn("bad-egress-allow", "  network:\n    egress: none\n    allow:\n    - cidr: 10.0.0.0/8\n"), field: "spec.network.allow", msg: "allow is for egress: listed only"},
	{name: "allow without egress", doc: pyFn("bad-egress-unset", "  network:\n    allow:\n    - cidr: 10.0.0.0/8\n"), field: "spec.network.allow", msg: "allow is for egress: listed only"},
	{name: "allow entry empty", doc: pyFn("bad-egress-entry", "  network:\n    egress: listed\n    allow:\n    - {}\n"), field: "spec.network.allow[0]", msg: "names a cidr, ports or both"},
	{name: "cidr not a range", doc: pyFn("bad-egress-cidr", "  network:\n    egress: listed\n    allow:\n    - cidr: example.com\n"), field: "spec.network.allow[0].cidr", msg: "canonical form"},
	{name: "cidr host bits", doc: pyFn("bad-egress-host", "  network:\n    egress: listed\n    allow:\n    - cidr: 10.1.2.3/8\n"), field: "spec.network.allow[0].cidr", msg: "canonical form"},
	{name: "cidr without length", doc: pyFn("bad-egress-len", "  network:\n    egress: listed\n    allow:\n    - cidr: 10.1.2.3\n"), field: "spec.network.allow[0].cidr", msg: "canonical form"},
	{name: "port zero", doc: pyFn("bad-egress-port", "  network:\n    egress: listed\n    allow:\n    - ports:\n      - port: 0\n"), field: "spec.network.allow[0].ports[0].port"},
	{name: "port above", doc: pyFn("bad-egress-port-hi", "  network:\n    egress: listed\n    allow:\n    - ports:\n      - port: 65536\n"), field: "spec.network.allow[0].ports[0].port"},
	{name: "port protocol", doc: pyFn("bad-egress-proto", "  network:\n    egress: listed\n    allow:\n    - ports:\n      - port: 80\n        protocol: ICMP\n"), field: "spec.network.allow[0].ports[0].protocol"},
}

func dev(name, spec string) string {
	return "apiVersion: sless.dev/v1alpha1\nkind: IoTDevice\nmetadata:\n  name: " + name + "\nspec:\n" + spec
}

func manyAttributes(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "    a%d: x\n", i)
	}
	return b.String()
}

// vols is a spec.volumes block of the given entries.
func vols(entries ...string) string { return "  volumes:\n" + strings.Join(entries, "") }

func svc(name, spec string) string {
	return "apiVersion: sless.dev/v1alpha1\nkind: SlessService\nmetadata:\n  name: " + name + "\nspec:\n" + spec
}

func pySvc(name, extra string) string {
	return svc(name, "  runtime: python3.12\n  entrypoint: app.app\n"+extra+pyFiles)
}

func validate(t *testing.T, doc string) field.ErrorList {
	t.Helper()
	var meta struct{ Kind string }
	if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
		t.Fatal(err)
	}
	var obj any
	var check func() field.ErrorList
	switch meta.Kind {
	case "Function":
		f := &v1.Function{}
		obj, check = f, func() field.ErrorList { return v1.ValidateFunction(f) }
	case "Trigger":
		tr := &v1.Trigger{}
		obj, check = tr, func() field.ErrorList { return v1.ValidateTrigger(tr) }
	case "SlessService":
		sv := &v1.SlessService{}
		obj, check = sv, func() field.ErrorList { return v1.ValidateSlessService(sv) }
	case "IoTDevice":
		d := &v1.IoTDevice{}
		obj, check = d, func() field.ErrorList { return v1.ValidateIoTDevice(d) }
	case "FunctionJob":
		j := &v1.FunctionJob{}
		obj, check = j, func() field.ErrorList { return v1.ValidateFunctionJob(j) }
	default:
		t.Fatalf("kind %q", meta.Kind)
	}
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return check()
}

// TestSchemaAndGoValidationAgree holds the CRD schema (served by a real
// apiserver) and the Go validation the REST API runs to the same verdicts.
func TestSchemaAndGoValidationAgree(t *testing.T) {
	kube := testbed.SharedKube(t)
	ns := kube.Namespace(t)
	for _, tc := range specCases {
		t.Run(tc.name, func(t *testing.T) {
			goErrs := validate(t, tc.doc)
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(tc.doc), &u.Object); err != nil {
				t.Fatal(err)
			}
			u.SetNamespace(ns)
			apiErr := kube.Client.Create(context.Background(), u, client.DryRunAll)

			if tc.valid {
				if len(goErrs) > 0 {
					t.Errorf("Go validation refused a valid spec: %v", goErrs.ToAggregate())
				}
				if apiErr != nil {
					t.Errorf("apiserver refused a valid spec: %v", apiErr)
				}
				return
			}
			named := false
			for _, e := range goErrs {
				named = named || e.Field == tc.field
			}
			if !named {
				t.Errorf("Go validation: want an error on %s, got %v", tc.field, goErrs.ToAggregate())
			}
			if tc.goOnly {
				if apiErr != nil {
					t.Errorf("apiserver refused what only Go should check (update the table): %v", apiErr)
				}
				return
			}
			want := tc.msg
			if want == "" {
				want = tc.field
			}
			if apiErr == nil {
				t.Errorf("apiserver accepted an invalid spec; want an error naming %s", want)
			} else if !strings.Contains(apiErr.Error(), want) {
				t.Errorf("apiserver error does not name %s: %v", want, apiErr)
			}
		})
	}
}

func TestCanonicalRuntime(t *testing.T) {
	for in, want := range map[string]string{"python3.11": "python3.12", "python3.12": "python3.12", "nodejs20": "nodejs22", "nodejs22": "nodejs22", "go1.24": "go1.24", "ruby3.0": "", "": ""} {
		got, ok := v1.CanonicalRuntime(in)
		if got != want || ok != (want != "") {
			t.Errorf("CanonicalRuntime(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestParseSchedule(t *testing.T) {
	for s, ok := range map[string]bool{"*/5 * * * *": true, "@weekly": true, "0 0 29 2 *": true, "@every 1h": false, "0 0 * *": false, "TZ=UTC @daily": false} {
		if err := v1.ParseSchedule(s); (err == nil) != ok {
			t.Errorf("ParseSchedule(%q) = %v, want ok=%v", s, err, ok)
		}
	}
}

func ExampleValidateFunction() {
	fn := &v1.Function{}
	fn.Name = "hello"
	fn.Spec.Runtime = "ruby3.0"
	fn.Spec.Source.Image = "registry.example.com/hello:1"
	for _, e := range v1.ValidateFunction(fn) {
		fmt.Println(e.Field, e.Type)
	}
	// Output: spec.runtime Unsupported value
}

// payloadOfSize is a JSON string of n bytes, quotes included, written as a
// YAML flow scalar that reads back the same.
func payloadOfSize(n int) string { return `"` + strings.Repeat("x", n-2) + `"` }

func TestCheckCallbackURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://hooks.example.com/done":     true,
		"http://127.0.0.1:8080/cb?x=1":       true,
		"http://[fd00::1]/cb":                true,
		"https://hooks.example.com":          true,
		"https://hooks.example.com/a@b":      true,
		"":                                   false,
		"hooks.example.com/done":             false,
		"//hooks.example.com/done":           false,
		"ftp://hooks.example.com/":           false,
		"HTTP://hooks.example.com/":          false,
		"https://user@hooks.example.com/":    false,
		"https://user:pw@hooks.example.com/": false,
		"https:///done":                      false,
		"https://:443/done":                  false,
		"https://hooks.example.com/a b":      false,
		"https://hooks.example.com/\n":       false,
		"https://hooks.example.com:http/":    false,
		"https://hooks%zz.example.com/":      false,
		"https://hooks.example.com/" + strings.Repeat("a", v1.MaxCallbackURLLength): false,
	} {
		if msg := v1.CheckCallbackURL(u); (msg == "") != ok {
			t.Errorf("CheckCallbackURL(%q) = %q, want ok=%v", u, msg, ok)
		}
	}
}
