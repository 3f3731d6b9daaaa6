package api_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
)

// fnWith is pythonFunction("x") with spec fields set (nil deletes one).
func fnWith(name string, spec map[string]any) map[string]any {
	b := pythonFunction(name)
	s := b["spec"].(map[string]any)
	for k, v := range spec {
		if v == nil {
			delete(s, k)
		} else {
			s[k] = v
		}
	}
	return b
}

func trgWith(name string, spec map[string]any) map[string]any {
	return map[string]any{"metadata": map[string]any{"name": name}, "spec": spec}
}

func jobWith(name string, spec map[string]any) map[string]any {
	return map[string]any{"metadata": map[string]any{"name": name}, "spec": spec}
}

func inline(files map[string]any) map[string]any {
	return map[string]any{"inline": map[string]any{"files": files}}
}

// TestBadRequests sends requests that are each wrong in one way and expects
// each to be answered with its 4xx and a problem+json body naming the fault,
// never a 5xx, and the cluster and S3 left exactly as they were.
func TestBadRequests(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alice := e.token("alice")
	want(t, e.do("POST", e.path("functions"), alice, pythonFunction("base")), http.StatusCreated)
	want(t, e.do("POST", e.path("triggers"), alice, trgWith("trg", map[string]any{"function": "base", "type": "http"})), http.StatusCreated)
	want(t, e.do("POST", e.path("jobs"), alice, jobWith("job", map[string]any{"function": "base"})), http.StatusCreated)
	want(t, e.do("PUT", e.path("functions", "base", "source"), alice, pythonZip(t, `"v1"`), "Content-Type", "application/zip"), http.StatusOK)
	want(t, e.do("POST", e.path("services"), alice, webService("websvc")), http.StatusCreated)

	// Another tenant's namespace with a Function in it.
	other := e.kube.Namespace(t)
	victim := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "secret"},
		Spec: slessv1alpha1.FunctionSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: "python3.12", Source: slessv1alpha1.FunctionSource{Image: "registry.example.com/x@sha256:" + sha64}}}}
	if err := e.kube.Client.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	otherFns := "/v1/namespaces/" + other + "/functions"

	noneToken := b64url(`{"alg":"none","typ":"JWT"}`) + "." + b64url(fmt.Sprintf(`{"sub":"alice","iss":"https://issuer.test","aud":"sless","exp":%d,"sless.dev/admin":true}`, time.Now().Add(time.Hour).Unix())) + "."
	forged, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "iss": "https://issuer.test", "aud": "sless",
		"exp": time.Now().Add(time.Hour).Unix(), "sless.dev/admin": true}).SignedString([]byte("an-attackers-secret-0123456789abcdef"))
	expired := e.token("alice", "exp", time.Now().Add(-time.Minute).Unix())
	wrongAud := e.token("alice", "aud", "someone-else")
	wrongIss := e.token("alice", "iss", "https://evil.test")
	future := e.token("alice", "nbf", time.Now().Add(time.Hour).Unix())
	critTok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "iss": "https://issuer.test", "aud": "sless",
		"exp": time.Now().Add(time.Hour).Unix(), "sless.dev/namespace": e.ns})
	critTok.Header["crit"] = []string{"https://example.com/must-check"}
	critTok.Header["https://example.com/must-check"] = true
	critical, _ := critTok.SignedString(testSecret)

	big := make([]byte, testLimits.MaxCompressed+10)
	_, _ = rand.Read(big)
	var manyEntries []zipEntry
	for i := range 51 {
		manyEntries = append(manyEntries, zipEntry{name: fmt.Sprintf("f%d.py", i), body: []byte("x = 1\n")})
	}
	mainPy := zipEntry{name: "main.py", body: []byte("def handler(e, c):\n    return 1\n")}
	hugeJSON := `{"metadata":{"name":"huge"},"spec":{"runtime":"python3.12","entrypoint":"main.handler","source":{"inline":{"files":{"main.py":"` +
		strings.Repeat("x", api.DefaultMaxObjectBytes) + `"}}}}}`
	mp := api.MergePatchContentType

	type row struct {
		name    string
		method  string
		path    string
		token   string // "" is alice; "-" sends none
		body    any
		headers []string
		code    int
		field   string // an errors[].field the problem must name, if set
		reason  string // the problem's reason, if set
		detail  string // a phrase the problem's detail must hold, if set
	}
	fns, item, src := e.path("functions"), e.path("functions", "base"), e.path("functions", "base", "source")
	rows := []row{
		// Malformed bodies.
		{name: "malformed JSON", method: "POST", path: fns, body: `{"metadata":`, code: 400},
		{name: "JSON array", method: "POST", path: fns, body: `[1,2]`, code: 400},
		{name: "empty body", method: "POST", path: fns, body: ``, code: 400},
		{name: "wrong JSON type", method: "POST", path: fns, body: fnWith("typed", map[string]any{"memoryMB": "big"}), code: 400, field: "spec.memoryMB"},
		{name: "number too large for its field", method: "POST", path: fns, body: `{"metadata":{"name":"typed"},"spec":{"timeoutSeconds":99999999999999999999}}`, code: 400, field: "spec.timeoutSeconds"},
		{name: "cpu not a quantity", method: "POST", path: fns, body: fnWith("typed", map[string]any{"cpu": "lots"}), code: 400, field: "spec.cpu"},
		{name: "env as an object", method: "POST", path: fns, body: fnWith("typed", map[string]any{"env": map[string]any{"A": "b"}}), code: 400, field: "spec.env"},
		{name: "env name a number", method: "POST", path: fns, body: fnWith("typed", map[string]any{"env": []any{map[string]any{"name": "A"}, map[string]any{"name": 1}}}), code: 400, field: "spec.env[1].name"},
		{name: "inline file not a string", method: "POST", path: fns, body: fnWith("typed", map[string]any{"source": inline(map[string]any{"main.py": 1})}), code: 400, field: "spec.source.inline.files[main.py]"},
		{name: "bad timestamp in ignored metadata", method: "POST", path: fns, body: `{"metadata":{"name":"typed","creationTimestamp":"yesterday"},"spec":{}}`, code: 400, field: "metadata.creationTimestamp"},
		{name: "unknown top-level field", method: "POST", path: fns, body: `{"metadata":{"name":"u"},"spec":{},"bogus":1}`, code: 400, field: "bogus"},
		{name: "unknown spec field", method: "POST", path: fns, body: fnWith("u", map[string]any{"memory": 128}), code: 400, field: "spec.memory"},
		{name: "wrongly cased field", method: "POST", path: fns, body: `{"metadata":{"name":"u"},"Spec":{}}`, code: 400, field: "Spec"},
		{name: "duplicate field", method: "POST", path: fns, body: `{"metadata":{"name":"u"},"metadata":{"name":"v"},"spec":{}}`, code: 400, field: "metadata"},
		{name: "wrong kind", method: "POST", path: fns, body: map[string]any{"kind": "Trigger", "metadata": map[string]any{"name": "k"}, "spec": map[string]any{}}, code: 400, field: "kind"},
		{name: "wrong apiVersion", method: "POST", path: fns, body: map[string]any{"apiVersion": "v1", "metadata": map[string]any{"name": "k"}, "spec": map[string]any{}}, code: 400, field: "apiVersion"},
		{name: "namespace mismatch", method: "POST", path: fns, body: map[string]any{"metadata": map[string]any{"name": "k", "namespace": "elsewhere"}, "spec": map[string]any{}}, code: 400, field: "metadata.namespace"},
		{name: "text/plain body", method: "POST", path: fns, body: `{}`, headers: []string{"Content-Type", "text/plain"}, code: 415},
		{name: "UTF-16 JSON", method: "POST", path: fns, body: "\xff\xfe{\x00}\x00", code: 400, field: "body"},
		{name: "UTF-16 JSON without a byte order mark", method: "PATCH", path: item, body: "{\x00}\x00", headers: []string{"Content-Type", mp}, code: 400, field: "body"},
		{name: "JSON declared latin-1", method: "POST", path: fns, body: `{}`, headers: []string{"Content-Type", "application/json; charset=iso-8859-1"}, code: 415},
		{name: "unparsable content type", method: "POST", path: fns, body: `{}`, headers: []string{"Content-Type", "application/json; charset"}, code: 415},
		{name: "latin-1 byte in inline code", method: "POST", path: fns, body: `{"metadata":{"name":"l1"},"spec":{"runtime":"python3.12","entrypoint":"main.handler","source":{"inline":{"files":{"main.py":"# caf` + "\xe9" + `\ndef handler(e, c):\n    return 1\n"}}}}}`, code: 400, field: "spec.source.inline.files[main.py]"},
		{name: "lone surrogate in an env value", method: "POST", path: fns, body: `{"metadata":{"name":"l2"},"spec":{"runtime":"python3.12","entrypoint":"main.handler","env":[{"name":"A","value":"x"},{"name":"B","value":"\ud800"}],"source":{"inline":{"files":{"main.py":"def handler(e, c):\n    return 1\n"}}}}}`, code: 400, field: "spec.env[1].value"},
		{name: "bad UTF-8 in a label value", method: "POST", path: fns, body: "{\"metadata\":{\"name\":\"l3\",\"labels\":{\"team\":\"\xff\"}},\"spec\":{}}", code: 400, field: "metadata.labels[team]"},
		{name: "bad UTF-8 in a key", method: "POST", path: e.path("jobs"), body: "{\"metadata\":{\"name\":\"l4\"},\"spec\":{\"function\":\"base\",\"payload\":{\"k\xc3\":1}}}", code: 400},
		{name: "oversized body", method: "POST", path: fns, body: hugeJSON, code: 413},

		// Names.
		{name: "missing name", method: "POST", path: fns, body: map[string]any{"metadata": map[string]any{}, "spec": map[string]any{}}, code: 400, field: "metadata.name"},
		{name: "upper-case name", method: "POST", path: fns, body: pythonFunction("Hello"), code: 400, field: "metadata.name"},
		{name: "function name starts with a digit", method: "POST", path: fns, body: pythonFunction("1abc"), code: 400, field: "metadata.name"},
		{name: "name too long", method: "POST", path: fns, body: pythonFunction(strings.Repeat("a", 53)), code: 400, field: "metadata.name"},
		{name: "bad name in path", method: "GET", path: e.path("functions", "Bad_Name"), code: 400, field: "name"},
		{name: "bad label", method: "POST", path: fns, body: map[string]any{"metadata": map[string]any{"name": "l", "labels": map[string]any{"a b": "c"}}, "spec": pythonFunction("l")["spec"]}, code: 400, field: "metadata.labels"},

		// Each validation bound of a Function.
		{name: "unknown runtime", method: "POST", path: fns, body: fnWith("v", map[string]any{"runtime": "python2"}), code: 400, field: "spec.runtime"},
		{name: "missing runtime", method: "POST", path: fns, body: fnWith("v", map[string]any{"runtime": nil}), code: 400, field: "spec.runtime"},
		{name: "memoryMB below 64", method: "POST", path: fns, body: fnWith("v", map[string]any{"memoryMB": 10}), code: 400, field: "spec.memoryMB"},
		{name: "memoryMB negative", method: "POST", path: fns, body: fnWith("v", map[string]any{"memoryMB": -10}), code: 400, field: "spec.memoryMB"},
		{name: "memoryMB above 4096", method: "POST", path: fns, body: fnWith("v", map[string]any{"memoryMB": 5000}), code: 400, field: "spec.memoryMB"},
		{name: "timeoutSeconds 0", method: "POST", path: fns, body: fnWith("v", map[string]any{"timeoutSeconds": 0}), code: 400, field: "spec.timeoutSeconds"},
		{name: "timeoutSeconds 901", method: "POST", path: fns, body: fnWith("v", map[string]any{"timeoutSeconds": 901}), code: 400, field: "spec.timeoutSeconds"},
		{name: "buildTimeoutSeconds 30", method: "POST", path: fns, body: fnWith("v", map[string]any{"buildTimeoutSeconds": 30}), code: 400, field: "spec.buildTimeoutSeconds"},
		{name: "cpu zero", method: "POST", path: fns, body: fnWith("v", map[string]any{"cpu": "0"}), code: 400, field: "spec.cpu"},
		{name: "empty entrypoint", method: "POST", path: fns, body: fnWith("v", map[string]any{"entrypoint": ""}), code: 400, field: "spec.entrypoint"},
		{name: "entrypoint without function", method: "POST", path: fns, body: fnWith("v", map[string]any{"entrypoint": "main"}), code: 400, field: "spec.entrypoint"},
		{name: "entrypoint file missing", method: "POST", path: fns, body: fnWith("v", map[string]any{"entrypoint": "other.handler"}), code: 400, field: "spec.entrypoint"},
		{name: "two sources", method: "POST", path: fns, body: fnWith("v", map[string]any{"source": map[string]any{"image": "r.example.com/x:1", "inline": map[string]any{"files": map[string]any{"main.py": "x"}}}}), code: 400, field: "spec.source"},
		{name: "no source", method: "POST", path: fns, body: fnWith("v", map[string]any{"source": map[string]any{}}), code: 400, field: "spec.source"},
		{name: "inline path traversal", method: "POST", path: fns, body: fnWith("v", map[string]any{"source": inline(map[string]any{"../main.py": "x", "main.py": "def handler(e,c): pass"})}), code: 400},
		{name: "scale max below min", method: "POST", path: fns, body: fnWith("v", map[string]any{"scale": map[string]any{"min": 3, "max": 2}}), code: 400, field: "spec.scale.max"},
		{name: "async concurrency zero", method: "POST", path: fns, body: fnWith("v", map[string]any{"async": map[string]any{"concurrency": 0}}), code: 400, field: "spec.async.concurrency"},
		{name: "async retries above", method: "POST", path: fns, body: fnWith("v", map[string]any{"async": map[string]any{"maxRetries": 11}}), code: 400, field: "spec.async.maxRetries"},
		{name: "async event age below", method: "POST", path: fns, body: fnWith("v", map[string]any{"async": map[string]any{"maxEventAgeSeconds": 30}}), code: 400, field: "spec.async.maxEventAgeSeconds"},
		{name: "async wrong JSON type", method: "POST", path: fns, body: fnWith("v", map[string]any{"async": map[string]any{"concurrency": "2"}}), code: 400, field: "spec.async.concurrency"},
		{name: "async onSuccess not http", method: "POST", path: fns, body: fnWith("v", map[string]any{"async": map[string]any{"onSuccess": "ftp://hooks.example.com/"}}), code: 400, field: "spec.async.onSuccess"},
		{name: "async onFailure with user info", method: "POST", path: fns, body: fnWith("v", map[string]any{"async": map[string]any{"onFailure": "https://u:p@hooks.example.com/"}}), code: 400, field: "spec.async.onFailure"},
		{name: "async onFailure relative", method: "POST", path: fns, body: fnWith("v", map[string]any{"async": map[string]any{"onFailure": "/done"}}), code: 400, field: "spec.async.onFailure"},
		{name: "async onSuccess too long", method: "POST", path: fns, body: fnWith("v", map[string]any{"async": map[string]any{"onSuccess": "https://hooks.example.com/" + strings.Repeat("a", 2048)}}), code: 400, field: "spec.async.onSuccess"},
		{name: "reserved env name", method: "POST", path: fns, body: fnWith("v", map[string]any{"env": []any{map[string]any{"name": "PORT", "value": "1"}}}), code: 400, field: "spec.env[0].name"},
		{name: "archive of another function", method: "POST", path: fns, body: fnWith("v", map[string]any{"source": map[string]any{"archive": map[string]any{"bucket": e.bucket, "key": other + "/secret/source/" + sha64 + ".zip", "sha256": sha64}}}), code: 400, field: "spec.source.archive"},
		{name: "archive never uploaded", method: "POST", path: fns, body: fnWith("v", map[string]any{"source": map[string]any{"archive": map[string]any{"bucket": e.bucket, "key": e.ns + "/v/source/" + sha64 + ".zip", "sha256": sha64}}}), code: 400, field: "spec.source.archive.sha256"},

		// Triggers and jobs.
		{name: "cron without schedule", method: "POST", path: e.path("triggers"), body: trgWith("c", map[string]any{"function": "base", "type": "cron"}), code: 400, field: "spec.schedule"},
		{name: "cron minute 61", method: "POST", path: e.path("triggers"), body: trgWith("c", map[string]any{"function": "base", "type": "cron", "schedule": "61 * * * *"}), code: 400, field: "spec.schedule"},
		{name: "unknown time zone", method: "POST", path: e.path("triggers"), body: trgWith("c", map[string]any{"function": "base", "type": "cron", "schedule": "@daily", "timeZone": "Mars/Olympus"}), code: 400, field: "spec.timeZone"},
		{name: "unknown trigger type", method: "POST", path: e.path("triggers"), body: trgWith("c", map[string]any{"function": "base", "type": "smtp"}), code: 400, field: "spec.type"},
		{name: "schedule on http trigger", method: "POST", path: e.path("triggers"), body: trgWith("c", map[string]any{"function": "base", "type": "http", "schedule": "@daily"}), code: 400, field: "spec.schedule"},
		{name: "trigger without function", method: "POST", path: e.path("triggers"), body: trgWith("c", map[string]any{"type": "http"}), code: 400, field: "spec.function"},
		{name: "job payload integer past int64", method: "POST", path: e.path("jobs"), body: `{"metadata":{"name":"j"},"spec":{"function":"base","payload":{"ids":[1,12345678901234567890]}}}`, code: 400, field: "spec.payload.ids[1]"},
		{name: "job payload decimal past float64 precision", method: "POST", path: e.path("jobs"), body: `{"metadata":{"name":"j"},"spec":{"function":"base","payload":{"price":0.1000000000000000055511151231257827}}}`, code: 400, field: "spec.payload.price"},
		{name: "trigger payload number past float64 range", method: "POST", path: e.path("triggers"), body: `{"metadata":{"name":"c"},"spec":{"function":"base","type":"cron","schedule":"@daily","payload":{"e":1e400}}}`, code: 400, field: "spec.payload.e"},
		{name: "PATCH job payload past int64", method: "PATCH", path: e.path("jobs", "job"), body: `{"spec":{"payload":{"n":-99999999999999999999}}}`, headers: []string{"Content-Type", mp}, code: 400, field: "spec.payload.n"},
		{name: "job runID negative", method: "POST", path: e.path("jobs"), body: jobWith("j", map[string]any{"function": "base", "runID": -1}), code: 400, field: "spec.runID"},
		{name: "job timeout 0", method: "POST", path: e.path("jobs"), body: jobWith("j", map[string]any{"function": "base", "timeoutSeconds": 0}), code: 400, field: "spec.timeoutSeconds"},
		{name: "job name of 41", method: "POST", path: e.path("jobs"), body: jobWith(strings.Repeat("j", 41), map[string]any{"function": "base"}), code: 400, field: "metadata.name"},

		// Changes to existing objects.
		{name: "PUT name mismatch", method: "PUT", path: item, body: pythonFunction("other"), code: 400, field: "metadata.name"},
		{name: "PUT invalid memory", method: "PUT", path: item, body: fnWith("base", map[string]any{"memoryMB": 1}), code: 400, field: "spec.memoryMB"},
		{name: "PUT missing object", method: "PUT", path: e.path("functions", "ghost"), body: pythonFunction("ghost"), code: 404},
		{name: "PATCH as application/json", method: "PATCH", path: item, body: `{"spec":{}}`, code: 415},
		{name: "PATCH renames", method: "PATCH", path: item, body: `{"metadata":{"name":"renamed"}}`, headers: []string{"Content-Type", mp}, code: 400, field: "metadata.name"},
		{name: "PATCH invalid memory", method: "PATCH", path: item, body: `{"spec":{"memoryMB":99999}}`, headers: []string{"Content-Type", mp}, code: 400, field: "spec.memoryMB"},
		{name: "PATCH unknown field", method: "PATCH", path: item, body: `{"spec":{"replicas":3}}`, headers: []string{"Content-Type", mp}, code: 400, field: "spec.replicas"},
		{name: "PATCH wrong JSON type", method: "PATCH", path: item, body: `{"spec":{"scale":{"max":"2"}}}`, headers: []string{"Content-Type", mp}, code: 400, field: "spec.scale.max"},
		{name: "PATCH not an object", method: "PATCH", path: item, body: `[1]`, headers: []string{"Content-Type", mp}, code: 400},
		{name: "PATCH with bad UTF-8", method: "PATCH", path: item, body: "{\"spec\":{\"source\":{\"inline\":{\"files\":{\"main.py\":\"\xe9\"}}}}}", headers: []string{"Content-Type", mp}, code: 400, field: "spec.source.inline.files[main.py]"},
		{name: "PATCH declared latin-1", method: "PATCH", path: item, body: `{"spec":{}}`, headers: []string{"Content-Type", mp + "; charset=latin1"}, code: 415},
		{name: "PATCH stale If-Match", method: "PATCH", path: item, body: `{"spec":{"memoryMB":256}}`, headers: []string{"Content-Type", mp, "If-Match", `"1"`}, code: 412},
		{name: "DELETE missing", method: "DELETE", path: e.path("triggers", "ghost"), code: 404},
		{name: "PATCH If-None-Match *", method: "PATCH", path: item, body: `{"spec":{"memoryMB":256}}`, headers: []string{"Content-Type", mp, "If-None-Match", "*"}, code: 412},
		{name: "PUT If-None-Match *", method: "PUT", path: item, body: fnWith("base", map[string]any{"memoryMB": 256}), headers: []string{"If-None-Match", "*"}, code: 412},
		{name: "DELETE If-None-Match *", method: "DELETE", path: e.path("triggers", "trg"), headers: []string{"If-None-Match", "*"}, code: 412},
		{name: "upload If-None-Match * to a Function that exists", method: "PUT", path: src, body: pythonZip(t, `"inm"`), headers: []string{"Content-Type", "application/zip", "If-None-Match", "*"}, code: 412},
		{name: "DELETE stale If-Match", method: "DELETE", path: e.path("jobs", "job"), headers: []string{"If-Match", `"1"`}, code: 412},
		{name: "GET missing", method: "GET", path: e.path("jobs", "ghost"), code: 404},
		{name: "list limit 0", method: "GET", path: fns + "?limit=0", code: 400, field: "limit"},
		{name: "list limit text", method: "GET", path: fns + "?limit=many", code: 400, field: "limit"},
		{name: "list bad cursor", method: "GET", path: fns + "?limit=1&cursor=bm90LWEtY3Vyc29y", code: 400, field: "cursor"},
		{name: "label selector unclosed set", method: "GET", path: fns + "?labelSelector=" + url.QueryEscape("env in (a,b"), code: 400, field: "labelSelector"},
		{name: "label selector trailing comma", method: "GET", path: e.path("triggers") + "?labelSelector=" + url.QueryEscape("app=web,"), code: 400, field: "labelSelector"},
		{name: "label selector bad operator", method: "GET", path: e.path("jobs") + "?labelSelector=" + url.QueryEscape("app!!=web"), code: 400, field: "labelSelector"},
		{name: "label selector invalid key", method: "GET", path: fns + "?labelSelector=" + url.QueryEscape("-app=web"), code: 400, field: "labelSelector"},
		{name: "label selector space in value", method: "GET", path: fns + "?labelSelector=" + url.QueryEscape("app=web site"), code: 400, field: "labelSelector"},
		{name: "label selector checked before the cursor", method: "GET", path: fns + "?limit=1&cursor=bm90LWEtY3Vyc29y&labelSelector=" + url.QueryEscape("!"), code: 400, field: "labelSelector"},
		{name: "list limit twice", method: "GET", path: fns + "?limit=1&limit=500", code: 400, field: "limit"},
		{name: "list label selector twice", method: "GET", path: fns + "?labelSelector=a%3Db&labelSelector=c%3Dd", code: 400, field: "labelSelector"},
		{name: "list fieldSelector", method: "GET", path: fns + "?fieldSelector=metadata.name%3Dbase", code: 400, field: "fieldSelector"},
		{name: "list query that does not parse", method: "GET", path: fns + "?limit=1&cursor=%zz", code: 400, field: "query"},
		{name: "create with dryRun", method: "POST", path: fns + "?dryRun=All", body: pythonFunction("dry"), code: 400, field: "dryRun"},
		{name: "PATCH with a query", method: "PATCH", path: item + "?force=true", body: `{"spec":{"memoryMB":256}}`, headers: []string{"Content-Type", mp}, code: 400, field: "force"},
		{name: "DELETE with propagationPolicy", method: "DELETE", path: e.path("jobs", "job") + "?propagationPolicy=Orphan", code: 400, field: "propagationPolicy"},
		{name: "whoami with a query", method: "GET", path: "/v1/whoami?as=admin", code: 400, field: "as"},
		{name: "upload runtime twice", method: "PUT", path: src + "?runtime=python3.12&runtime=nodejs22", body: pythonZip(t, "1"), headers: []string{"Content-Type", "application/zip"}, code: 400, field: "runtime"},
		{name: "upload unknown parameter", method: "PUT", path: src + "?entrypiont=main.handler", body: pythonZip(t, "1"), headers: []string{"Content-Type", "application/zip"}, code: 400, field: "entrypiont"},
		{name: "method not allowed", method: "POST", path: item, body: `{}`, code: 405},
		{name: "unknown route", method: "GET", path: "/v1/namespaces/" + e.ns + "/widgets", code: 404},

		// Authentication.
		{name: "no token", method: "GET", path: fns, token: "-", code: 401},
		{name: "basic auth", method: "GET", path: fns, token: "-", headers: []string{"Authorization", "Basic YWxpY2U6cHc="}, code: 401},
		{name: "garbage token", method: "GET", path: fns, token: "not-a-jwt", code: 401},
		{name: "expired token", method: "GET", path: fns, token: expired, code: 401},
		{name: "not yet valid token", method: "GET", path: fns, token: future, code: 401},
		{name: "wrong audience", method: "GET", path: fns, token: wrongAud, code: 401},
		{name: "wrong issuer", method: "GET", path: fns, token: wrongIss, code: 401, reason: auth.ReasonWrongIssuer, detail: "iss claim"},
		{name: "no issuer", method: "GET", path: fns, token: e.token("alice", "iss", nil), code: 401, reason: auth.ReasonMissingClaim, detail: "no iss claim"},
		{name: "no audience", method: "GET", path: fns, token: e.token("alice", "aud", nil), code: 401, reason: auth.ReasonMissingClaim, detail: "no aud claim"},
		{name: "expiry not a number", method: "GET", path: fns, token: e.token("alice", "exp", "tomorrow"), code: 401, reason: auth.ReasonInvalidClaim, detail: "exp claim"},
		{name: "forged signature", method: "POST", path: fns, token: forged, body: pythonFunction("forged"), code: 401},
		{name: "alg none", method: "DELETE", path: item, token: noneToken, code: 401},
		{name: "critical header extension", method: "POST", path: fns, token: critical, body: pythonFunction("crit"), code: 401, reason: auth.ReasonCritical},

		// Other tenants.
		{name: "cross-tenant read", method: "GET", path: otherFns + "/secret", code: 403},
		{name: "cross-tenant read of a missing name", method: "GET", path: otherFns + "/nothing", code: 403},
		{name: "cross-tenant list", method: "GET", path: otherFns, code: 403},
		{name: "cross-tenant create", method: "POST", path: otherFns, body: pythonFunction("planted"), code: 403},
		{name: "cross-tenant replace", method: "PUT", path: otherFns + "/secret", body: pythonFunction("secret"), code: 403},
		{name: "cross-tenant delete", method: "DELETE", path: otherFns + "/secret", code: 403},
		{name: "cross-tenant upload", method: "PUT", path: otherFns + "/secret/source", body: pythonZip(t, "1"), headers: []string{"Content-Type", "application/zip"}, code: 403},
		{name: "cross-tenant download", method: "GET", path: otherFns + "/secret/source", code: 403},
		{name: "cross-tenant service upload", method: "PUT", path: "/v1/namespaces/" + other + "/services/secret/source", body: pythonZip(t, "1"), headers: []string{"Content-Type", "application/zip"}, code: 403},
		{name: "token naming default", method: "POST", path: "/v1/namespaces/default/functions", token: e.token("alice", "sless.dev/namespace", "default"), body: pythonFunction("planted"), code: 403, reason: api.ReasonNotTenantNamespace},
		{name: "token naming kube-system", method: "GET", path: "/v1/namespaces/kube-system/functions", token: e.token("alice", "sless.dev/namespace", "kube-system"), code: 401, reason: auth.ReasonInvalidClaim},
	}
	// Uploads, the same refusals for each kind built from source.
	for _, u := range []struct{ label, src string }{{"", src}, {"service ", e.path("services", "websvc", "source")}} {
		rows = append(rows, []row{
			{name: u.label + "zip bomb", method: "PUT", path: u.src, body: makeZip(t, mainPy, zipEntry{name: "zeros.bin", body: make([]byte, 3<<20)}), headers: []string{"Content-Type", "application/zip"}, code: 413, field: "body"},
			{name: u.label + "zip traversal", method: "PUT", path: u.src, body: makeZip(t, mainPy, zipEntry{name: "../../etc/cron.d/x", body: []byte("x")}), headers: []string{"Content-Type", "application/zip"}, code: 400, field: "body"},
			{name: u.label + "zip absolute path", method: "PUT", path: u.src, body: makeZip(t, mainPy, zipEntry{name: "/etc/passwd", body: []byte("x")}), headers: []string{"Content-Type", "application/zip"}, code: 400, field: "body"},
			{name: u.label + "zip symlink", method: "PUT", path: u.src, body: makeZip(t, mainPy, zipEntry{name: "link", body: []byte("/etc/shadow"), mode: fs.ModeSymlink | 0o777}), headers: []string{"Content-Type", "application/zip"}, code: 400, field: "body"},
			{name: u.label + "zip duplicate names", method: "PUT", path: u.src, body: makeZip(t, mainPy, mainPy), headers: []string{"Content-Type", "application/zip"}, code: 400, field: "body"},
			{name: u.label + "zip without entrypoint", method: "PUT", path: u.src, body: makeZip(t, zipEntry{name: "other.py", body: []byte("x=1")}), headers: []string{"Content-Type", "application/zip"}, code: 400, field: "spec.entrypoint"},
			{name: u.label + "zip too many entries", method: "PUT", path: u.src, body: makeZip(t, append(manyEntries, mainPy)...), headers: []string{"Content-Type", "application/zip"}, code: 413, field: "body"},
			{name: u.label + "zip too large", method: "PUT", path: u.src, body: big, headers: []string{"Content-Type", "application/zip"}, code: 413},
			{name: u.label + "zip with a password", method: "PUT", path: u.src, body: encryptedZip(t), headers: []string{"Content-Type", "application/zip"}, code: 400, field: "body"},
			{name: u.label + "not a zip", method: "PUT", path: u.src, body: []byte("PK but not really a zip file"), headers: []string{"Content-Type", "application/zip"}, code: 400, field: "body"},
			{name: u.label + "empty upload", method: "PUT", path: u.src, body: []byte{}, headers: []string{"Content-Type", "application/zip"}, code: 400},
			{name: u.label + "multipart without a file part", method: "PUT", path: u.src, body: "--b\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n--b--\r\n", headers: []string{"Content-Type", "multipart/form-data; boundary=b"}, code: 400, field: "file"},
			{name: u.label + "multipart without a boundary", method: "PUT", path: u.src, body: pythonZip(t, "1"), headers: []string{"Content-Type", "multipart/form-data"}, code: 400, field: "body"},
			{name: u.label + "upload as text", method: "PUT", path: u.src, body: pythonZip(t, "1"), headers: []string{"Content-Type", "text/plain"}, code: 415},
		}...)
	}
	if len(rows) < 40 {
		t.Fatalf("only %d rows", len(rows))
	}

	before := e.snapshot()
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.token
			switch tok {
			case "":
				tok = alice
			case "-":
				tok = ""
			}
			headers := tc.headers
			if tc.body != nil && !slices.Contains(headers, "Content-Type") {
				headers = append([]string{"Content-Type", "application/json"}, headers...)
			}
			r := e.do(tc.method, tc.path, tok, tc.body, headers...)
			if r.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", r.Code, tc.code, r.Body)
			}
			p := r.problem(t)
			if tc.field != "" && !slices.ContainsFunc(p.Errors, func(f api.FieldError) bool { return f.Field == tc.field }) {
				t.Fatalf("problem does not name field %q: %s", tc.field, r.Body)
			}
			if p.Detail == "" {
				t.Fatalf("problem without detail: %s", r.Body)
			}
			if tc.reason != "" && p.Reason != tc.reason {
				t.Fatalf("reason %q, want %q: %s", p.Reason, tc.reason, r.Body)
			}
			if !strings.Contains(p.Detail, tc.detail) {
				t.Fatalf("detail does not say %q: %s", tc.detail, r.Body)
			}
			// Messages name the path as sent, never a route template.
			if body := string(r.Body); strings.Contains(body, "/:") || strings.Contains(body, "*path") {
				t.Fatalf("a route template leaks into the problem: %s", body)
			}
			// Every refused input names what is at fault: a field of the
			// body, the body, a query parameter or a header.
			if (tc.code == http.StatusBadRequest || tc.code == http.StatusRequestEntityTooLarge || tc.code == http.StatusUnsupportedMediaType) && len(p.Errors) == 0 {
				t.Fatalf("a %d naming nothing in errors[]: %s", tc.code, r.Body)
			}
			if tc.code == http.StatusUnauthorized && r.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	if after := e.snapshot(); !slices.Equal(before, after) {
		t.Fatalf("bad requests changed the world:\nbefore %v\nafter  %v", before, after)
	}
	// The cluster-side view of the other tenant's function is untouched too.
	if err := e.kube.Client.Get(ctx, clientKey(other, "secret"), victim); err != nil || victim.Generation != 1 {
		t.Fatalf("other tenant's function: %v generation %d", err, victim.Generation)
	}
}

func b64url(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestProblemBodiesAreJSON checks that the problem type is stable JSON for
// clients: the fields of RFC 9457 plus errors.
func TestProblemBodiesAreJSON(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", e.path("functions"), e.token("alice"), fnWith("p", map[string]any{"memoryMB": 1, "timeoutSeconds": 0}))
	want(t, r, http.StatusBadRequest)
	var raw map[string]any
	if err := json.NewDecoder(bytes.NewReader(r.Body)).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"type", "title", "status", "detail", "instance", "errors"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("problem lacks %q: %s", k, r.Body)
		}
	}
	if n := len(raw["errors"].([]any)); n != 2 {
		t.Errorf("want both field errors, got %d: %s", n, r.Body)
	}
}

// TestUnicodeKeptExactly: text that is valid Unicode however it is written
// (raw UTF-8, \u escapes, a surrogate pair, U+FFFD itself) is stored as sent.
func TestUnicodeKeptExactly(t *testing.T) {
	e := newEnv(t)
	code := "# café ☕ \uFFFD 😀 <&>\ndef handler(e, c):\n    return 1\n"
	body := `{"metadata":{"name":"uni"},"spec":{"runtime":"python3.12","entrypoint":"main.handler","source":{"inline":{"files":{"main.py":` +
		`"# caf\u00e9 ☕ \ufffd \ud83d\ude00 \u003c\u0026>\ndef handler(e, c):\n    return 1\n"}}}}}`
	want(t, e.do("POST", e.path("functions"), e.token("alice"), body, "Content-Type", "application/json; charset=UTF-8"), http.StatusCreated)
	if got := e.getFunction("uni").Spec.Source.Inline.Files["main.py"]; got != code {
		t.Fatalf("stored %q, sent %q", got, code)
	}

	// Payload numbers the store keeps as sent: int64, and decimals that
	// float64 holds exactly enough to give back the same digits.
	payload := `{"big":9223372036854775807,"neg":-9223372036854775808,"f":0.1,"e":1e300,"small":2.5e-8}`
	want(t, e.do("POST", e.path("jobs"), e.token("alice"), `{"metadata":{"name":"nums"},"spec":{"function":"uni","payload":`+payload+`}}`), http.StatusCreated)
	job := &slessv1alpha1.FunctionJob{}
	if err := e.kube.Client.Get(context.Background(), clientKey(e.ns, "nums"), job); err != nil {
		t.Fatal(err)
	}
	var sent, kept map[string]json.Number
	d := json.NewDecoder(strings.NewReader(payload))
	d.UseNumber()
	_ = d.Decode(&sent)
	d = json.NewDecoder(bytes.NewReader(job.Spec.Payload.Raw))
	d.UseNumber()
	_ = d.Decode(&kept)
	for k, v := range sent {
		a, _ := new(big.Rat).SetString(string(v))
		b, ok := new(big.Rat).SetString(string(kept[k]))
		if !ok || a.Cmp(b) != 0 {
			t.Errorf("payload %s: sent %s, stored %s", k, v, kept[k])
		}
	}

	// A leading byte order mark, as Windows PowerShell writes UTF-8 files,
	// is not part of the JSON (RFC 8259 8.1).
	bom := "\xef\xbb\xbf"
	want(t, e.do("POST", e.path("jobs"), e.token("alice"), bom+`{"metadata":{"name":"bom"},"spec":{"function":"uni"}}`), http.StatusCreated)
	want(t, e.do("PATCH", e.path("jobs", "bom"), e.token("alice"), bom+`{"spec":{"runID":3}}`, "Content-Type", api.MergePatchContentType), http.StatusOK)
}

// encryptedZip is a zip whose main.py is flagged as encrypted (ZipCrypto),
// as zip -P makes it.
func encryptedZip(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	cipher := []byte("0123456789ab-not-python-but-cipher-text")
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "main.py", Method: zip.Store, Flags: 0x1,
		CRC32: crc32.ChecksumIEEE(cipher), CompressedSize64: uint64(len(cipher)), UncompressedSize64: uint64(len(cipher) - 12)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(cipher); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestUnsupportedMediaTypeSaysWhatIsAccepted: a PATCH in another patch format
// (JSON Patch, strategic merge) is told the one it takes in Accept-Patch, and
// a create in another format the one in Accept-Post.
func TestUnsupportedMediaTypeSaysWhatIsAccepted(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("m")), http.StatusCreated)
	for _, ct := range []string{"application/json-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml", "application/json"} {
		r := e.do("PATCH", e.path("functions", "m"), tok, `[{"op":"replace","path":"/spec/memoryMB","value":256}]`, "Content-Type", ct)
		want(t, r, http.StatusUnsupportedMediaType)
		if got := r.Header.Get("Accept-Patch"); got != api.MergePatchContentType {
			t.Errorf("PATCH as %s: Accept-Patch %q", ct, got)
		}
	}
	r := e.do("POST", e.path("functions"), tok, "metadata:\n  name: y\n", "Content-Type", "application/yaml")
	want(t, r, http.StatusUnsupportedMediaType)
	if got := r.Header.Get("Accept-Post"); got != "application/json" {
		t.Errorf("POST as YAML: Accept-Post %q", got)
	}
}
