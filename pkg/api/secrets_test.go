package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/secrets"
	"github.com/sless-dev/sless/pkg/secrets/sealed"
	"github.com/sless-dev/sless/test/testbed"
)

const secretValue = "s3cr3t-value-7c1f0a9e"

// secretStores are the two back ends of the secrets API: Kubernetes Secrets
// on the test apiserver, and local mode's sealed store on disk.
func secretStores(t *testing.T) map[string]func(*api.Options) {
	return map[string]func(*api.Options){
		"cluster": func(*api.Options) {},
		"local": func(o *api.Options) {
			scheme := runtime.NewScheme()
			if err := corev1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			objects, err := apiserver.Open(filepath.Join(dir, "sless.db"), scheme)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { objects.Close() })
			sealer, err := sealed.LoadKey(filepath.Join(dir, "secrets.key"))
			if err != nil {
				t.Fatal(err)
			}
			o.Secrets = &sealed.Store{Objects: objects, Sealer: sealer}
		},
	}
}

func secretBody(name string, kv ...string) map[string]any {
	data := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		data[kv[i]] = kv[i+1]
	}
	return map[string]any{"metadata": map[string]any{"name": name}, "stringData": data}
}

func TestSecretCRUD(t *testing.T) {
	for mode, store := range secretStores(t) {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, store)
			tok := e.token("alice")
			r := e.do("POST", e.path("secrets"), tok, secretBody("db", "password", secretValue, "user", "app"))
			want(t, r, http.StatusCreated)
			info := decode[secrets.Info](t, r)
			if info.Metadata.Name != "db" || info.Metadata.Namespace != e.ns || info.Type != "Opaque" ||
				strings.Join(info.Keys, ",") != "password,user" || info.UpdatedAt.IsZero() || info.Metadata.UID == "" {
				t.Fatalf("created: %s", r.Body)
			}
			if r.Header.Get("ETag") != `"`+info.Metadata.ResourceVersion+`"` || r.Header.Get("Location") != e.path("secrets", "db") {
				t.Fatalf("headers: %v", r.Header)
			}
			want(t, e.do("POST", e.path("secrets"), tok, secretBody("db", "password", "x")), http.StatusConflict)

			// Binary values go in as base64.
			bin := []byte{0, 1, 2, 0xff}
			r = e.do("POST", e.path("secrets"), tok, map[string]any{"metadata": map[string]any{"name": "cert.tls"},
				"data": map[string]any{"key.der": base64.StdEncoding.EncodeToString(bin)}})
			want(t, r, http.StatusCreated)

			r = e.do("GET", e.path("secrets", "db"), tok, nil)
			want(t, r, http.StatusOK)
			if got := decode[secrets.Info](t, r); got.Metadata.ResourceVersion != info.Metadata.ResourceVersion {
				t.Fatalf("GET: %s", r.Body)
			}
			want(t, e.do("GET", e.path("secrets", "db"), tok, nil, "If-None-Match", r.Header.Get("ETag")), http.StatusNotModified)
			r = e.do("GET", e.path("secrets"), tok, nil)
			want(t, r, http.StatusOK)
			if l := decode[api.SecretList](t, r); len(l.Items) != 2 || l.Items[0].Metadata.Name != "cert.tls" || l.Items[1].Metadata.Name != "db" {
				t.Fatalf("list: %s", r.Body)
			}
			r = e.do("GET", e.path("secrets")+"?limit=1", tok, nil)
			want(t, r, http.StatusOK)
			page := decode[api.SecretList](t, r)
			if len(page.Items) != 1 || page.Next == "" {
				t.Fatalf("first page: %s", r.Body)
			}
			r = e.do("GET", e.path("secrets")+"?limit=1&cursor="+page.Next, tok, nil)
			want(t, r, http.StatusOK)
			if l := decode[api.SecretList](t, r); len(l.Items) != 1 || l.Items[0].Metadata.Name != "db" || l.Next != "" {
				t.Fatalf("second page: %s", r.Body)
			}

			// Rotate: a stale If-Match is refused, the current one passes.
			rot := secretBody("db", "password", secretValue+"-2")
			want(t, e.do("PUT", e.path("secrets", "db"), tok, rot, "If-Match", `"999999999"`), http.StatusPreconditionFailed)
			r = e.do("PUT", e.path("secrets", "db"), tok, rot, "If-Match", `"`+info.Metadata.ResourceVersion+`"`)
			want(t, r, http.StatusOK)
			rotated := decode[secrets.Info](t, r)
			if rotated.Metadata.ResourceVersion == info.Metadata.ResourceVersion || strings.Join(rotated.Keys, ",") != "password" ||
				rotated.Metadata.UID != info.Metadata.UID {
				t.Fatalf("after PUT: %s", r.Body)
			}
			if got := e.secretData(t, "db"); string(got["password"]) != secretValue+"-2" {
				t.Fatalf("stored after PUT: %d keys", len(got))
			}
			// A body's stale resourceVersion is a conflict.
			stale := secretBody("db", "password", "x")
			stale["metadata"].(map[string]any)["resourceVersion"] = info.Metadata.ResourceVersion
			want(t, e.do("PUT", e.path("secrets", "db"), tok, stale), http.StatusConflict)

			// PATCH adds a key and removes another.
			r = e.do("PATCH", e.path("secrets", "db"), tok, `{"stringData":{"user":"app2"}}`, "Content-Type", api.MergePatchContentType)
			want(t, r, http.StatusOK)
			r = e.do("PATCH", e.path("secrets", "db"), tok, `{"stringData":{"password":null}}`, "Content-Type", api.MergePatchContentType)
			want(t, r, http.StatusOK)
			if got := decode[secrets.Info](t, r); strings.Join(got.Keys, ",") != "user" {
				t.Fatalf("after PATCH: %s", r.Body)
			}
			// Removing the last key leaves an empty secret: refused.
			r = e.do("PATCH", e.path("secrets", "db"), tok, `{"stringData":{"user":null}}`, "Content-Type", api.MergePatchContentType)
			want(t, r, http.StatusBadRequest)
			r.problem(t)

			want(t, e.do("DELETE", e.path("secrets", "db"), tok, nil, "If-Match", `"999999999"`), http.StatusPreconditionFailed)
			want(t, e.do("DELETE", e.path("secrets", "db"), tok, nil), http.StatusNoContent)
			want(t, e.do("GET", e.path("secrets", "db"), tok, nil), http.StatusNotFound)
			want(t, e.do("DELETE", e.path("secrets", "db"), tok, nil), http.StatusNotFound)
			want(t, e.do("PUT", e.path("secrets", "db"), tok, rot), http.StatusNotFound)
		})
	}
}

// secretData reads a secret's values from the store behind the API.
func (e *env) secretData(t *testing.T, name string) map[string][]byte {
	t.Helper()
	return e.secretOf(t, name).Data
}

func (e *env) secretOf(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := e.opts.Secrets.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// A Secret the API did not make is out of its reach: not listed, not
// shown, not rotated, not deleted, and not taken over by a create.
func TestSecretsLeaveOtherSecretsAlone(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	ctx := context.Background()
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "registry-creds"},
		StringData: map[string]string{"token": secretValue}}
	if err := e.kube.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	// Labelled by sless for another purpose (a trigger credential).
	trig := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "trigger-token",
		Labels: map[string]string{secrets.LabelManagedBy: secrets.ManagedBy}}, StringData: map[string]string{"token": secretValue}}
	if err := e.kube.Client.Create(ctx, trig); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", e.path("secrets"), tok, nil)
	want(t, r, http.StatusOK)
	if l := decode[api.SecretList](t, r); len(l.Items) != 0 {
		t.Fatalf("listed: %s", r.Body)
	}
	for _, name := range []string{"registry-creds", "trigger-token"} {
		want(t, e.do("GET", e.path("secrets", name), tok, nil), http.StatusNotFound)
		want(t, e.do("PUT", e.path("secrets", name), tok, secretBody(name, "token", "overwritten")), http.StatusNotFound)
		want(t, e.do("PATCH", e.path("secrets", name), tok, `{"stringData":{"token":"x"}}`, "Content-Type", api.MergePatchContentType), http.StatusNotFound)
		want(t, e.do("DELETE", e.path("secrets", name), tok, nil), http.StatusNotFound)
		want(t, e.do("POST", e.path("secrets"), tok, secretBody(name, "token", "overwritten")), http.StatusConflict)
		s := &corev1.Secret{}
		if err := e.kube.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, s); err != nil {
			t.Fatalf("%s after the API's attempts: %v", name, err)
		}
		if string(s.Data["token"]) != secretValue {
			t.Fatalf("%s was changed", name)
		}
	}
}

func TestSecretBadRequests(t *testing.T) {
	e := newEnv(t)
	alice := e.token("alice")
	want(t, e.do("POST", e.path("secrets"), alice, secretBody("base", "k", "v")), http.StatusCreated)
	other := e.kube.Namespace(t)
	forged, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "iss": "https://issuer.test", "aud": "sless",
		"exp": time.Now().Add(time.Hour).Unix(), "sless.dev/admin": true}).SignedString([]byte("an-attackers-secret-0123456789abcdef"))
	mp := api.MergePatchContentType
	tooBig := strings.Repeat("x", secrets.MaxBytes+1)
	hugeBody := `{"metadata":{"name":"huge"},"stringData":{"k":"` + strings.Repeat("x", api.DefaultMaxObjectBytes) + `"}}`
	many := map[string]any{}
	for i := range secrets.MaxKeys + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		headers                   []string
		code                      int
		field                     string
	}{
		{"no token", "GET", e.path("secrets"), "-", nil, nil, 401, ""},
		{"forged token", "GET", e.path("secrets"), forged, nil, nil, 401, ""},
		{"forged token rotates", "PUT", e.path("secrets", "base"), forged, secretBody("base", "k", "v"), nil, 401, ""},
		{"foreign namespace list", "GET", "/v1/namespaces/" + other + "/secrets", "", nil, nil, 403, ""},
		{"foreign namespace create", "POST", "/v1/namespaces/" + other + "/secrets", "", secretBody("x", "k", "v"), nil, 403, ""},
		{"bad name in path", "GET", e.path("secrets", "Bad_Name"), "", nil, nil, 400, "name"},
		{"bad name in body", "POST", e.path("secrets"), "", secretBody("Bad_Name", "k", "v"), nil, 400, "metadata.name"},
		{"name too long", "POST", e.path("secrets"), "", secretBody(strings.Repeat("a", 254), "k", "v"), nil, 400, "metadata.name"},
		{"no name", "POST", e.path("secrets"), "", secretBody("", "k", "v"), nil, 400, "metadata.name"},
		{"bad key", "POST", e.path("secrets"), "", secretBody("x", "a/b", "v"), nil, 400, "data[a/b]"},
		{"empty key", "POST", e.path("secrets"), "", secretBody("x", "", "v"), nil, 400, "data[]"},
		{"no keys", "POST", e.path("secrets"), "", secretBody("x"), nil, 400, "data"},
		{"too many keys", "POST", e.path("secrets"), "", map[string]any{"metadata": map[string]any{"name": "x"}, "stringData": many}, nil, 400, "data"},
		{"value too large", "POST", e.path("secrets"), "", secretBody("x", "k", tooBig), nil, 400, "data"},
		{"body too large", "POST", e.path("secrets"), "", hugeBody, nil, 413, "body"},
		{"not JSON", "POST", e.path("secrets"), "", "password=hunter2", nil, 400, "body"},
		{"JSON array", "POST", e.path("secrets"), "", `[]`, nil, 400, "body"},
		{"value not a string", "POST", e.path("secrets"), "", `{"metadata":{"name":"x"},"stringData":{"k":1}}`, nil, 400, "stringData.k"},
		{"data not base64", "POST", e.path("secrets"), "", `{"metadata":{"name":"x"},"data":{"k":"not base64!"}}`, nil, 400, "data.k"},
		{"unknown field", "POST", e.path("secrets"), "", `{"metadata":{"name":"x"},"stringData":{"k":"v"},"values":{}}`, nil, 400, "values"},
		{"duplicate field", "POST", e.path("secrets"), "", `{"metadata":{"name":"x"},"stringData":{"k":"v","k":"w"}}`, nil, 400, ""},
		{"key twice", "POST", e.path("secrets"), "", `{"metadata":{"name":"x"},"stringData":{"k":"v"},"data":{"k":"dg=="}}`, nil, 400, "stringData[k]"},
		{"namespace mismatch", "POST", e.path("secrets"), "", `{"metadata":{"name":"x","namespace":"elsewhere"},"stringData":{"k":"v"}}`, nil, 400, "metadata.namespace"},
		{"resourceVersion on create", "POST", e.path("secrets"), "", `{"metadata":{"name":"x","resourceVersion":"1"},"stringData":{"k":"v"}}`, nil, 400, "metadata.resourceVersion"},
		{"wrong media type", "POST", e.path("secrets"), "", `{}`, []string{"Content-Type", "text/plain"}, 415, "Content-Type"},
		{"name mismatch on rotate", "PUT", e.path("secrets", "base"), "", secretBody("other", "k", "v"), nil, 400, "metadata.name"},
		{"patch not merge patch", "PATCH", e.path("secrets", "base"), "", `{"stringData":{"k":"v"}}`, nil, 415, "Content-Type"},
		{"patch bad key", "PATCH", e.path("secrets", "base"), "", `{"stringData":{"a b":"v"}}`, []string{"Content-Type", mp}, 400, "data[a b]"},
		{"patch unknown field", "PATCH", e.path("secrets", "base"), "", `{"spec":{}}`, []string{"Content-Type", mp}, 400, "spec"},
		{"unknown query", "GET", e.path("secrets") + "?labelSelector=a", "", nil, nil, 400, "labelSelector"},
		{"bad limit", "GET", e.path("secrets") + "?limit=0", "", nil, nil, 400, "limit"},
		{"bad cursor", "GET", e.path("secrets") + "?cursor=abc", "", nil, nil, 400, "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.token
			switch tok {
			case "":
				tok = alice
			case "-":
				tok = ""
			}
			r := e.do(tc.method, tc.path, tok, tc.body, tc.headers...)
			want(t, r, tc.code)
			p := r.problem(t)
			if tc.field != "" {
				var fields []string
				for _, fe := range p.Errors {
					fields = append(fields, fe.Field)
				}
				if !strings.Contains(","+strings.Join(fields, ",")+",", ","+tc.field+",") {
					t.Fatalf("problem names %v, want %s: %s", fields, tc.field, r.Body)
				}
			}
		})
	}
	// Nothing was made or changed by the rows.
	r := e.do("GET", e.path("secrets"), alice, nil)
	if l := decode[api.SecretList](t, r); len(l.Items) != 1 {
		t.Fatalf("after the bad requests: %s", r.Body)
	}
	if got := e.secretData(t, "base"); string(got["k"]) != "v" {
		t.Fatal("a refused request changed the secret")
	}
}

// No answer (body or header) and no log line holds a value, whatever the
// request: created, rotated, patched, refused, conflicting or failing.
func TestSecretValuesNeverShown(t *testing.T) {
	for mode, store := range secretStores(t) {
		t.Run(mode, func(t *testing.T) {
			logs := &testbed.SyncBuffer{}
			e := newEnv(t, store, func(o *api.Options) {
				o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			})
			tok := e.token("alice")
			v1, v2, v3 := secretValue+"-one", secretValue+"-two", secretValue+"-three"
			var answers []*response
			do := func(method, path string, body any, headers ...string) *response {
				r := e.do(method, path, tok, body, headers...)
				answers = append(answers, r)
				return r
			}
			do("POST", e.path("secrets"), secretBody("db", "password", v1))
			do("POST", e.path("secrets"), secretBody("db", "password", v1))                      // conflict
			do("POST", e.path("secrets"), secretBody("Bad", "password", v1))                     // bad name
			do("POST", e.path("secrets"), secretBody("x", "bad key", v1))                        // bad key
			do("POST", e.path("secrets"), `{"metadata":{"name":"x"},"stringData":{"k":"`+v1+`}`) // not JSON
			do("POST", e.path("secrets"), `{"metadata":{"name":"x"},"data":{"k":"`+v1+`"}}`)     // not base64
			do("POST", e.path("secrets"), `{"metadata":{"name":"x"},"stringData":{"k":"`+v1+`","k":"`+v2+`"}}`)
			do("POST", e.path("secrets"), map[string]any{"metadata": map[string]any{"name": "x"}, "stringData": map[string]any{"k": v1}, "data": map[string]any{"k": base64.StdEncoding.EncodeToString([]byte(v2))}})
			do("PUT", e.path("secrets", "db"), secretBody("db", "password", v2), "If-Match", `"999999999"`)
			do("PUT", e.path("secrets", "db"), secretBody("db", "password", v2))
			do("PATCH", e.path("secrets", "db"), `{"stringData":{"password":"`+v3+`"}}`, "Content-Type", api.MergePatchContentType)
			do("PATCH", e.path("secrets", "db"), `{"stringData":{"bad key":"`+v3+`"}}`, "Content-Type", api.MergePatchContentType)
			do("GET", e.path("secrets", "db"), nil)
			do("HEAD", e.path("secrets", "db"), nil)
			do("GET", e.path("secrets"), nil)
			if got := e.secretData(t, "db"); string(got["password"]) != v3 {
				t.Fatal("the rotations did not reach the store")
			}
			do("DELETE", e.path("secrets", "db"), nil)
			for _, v := range []string{v1, v2, v3} {
				forms := []string{v, base64.StdEncoding.EncodeToString([]byte(v)), secretValue}
				for i, r := range answers {
					for _, f := range forms {
						if bytes.Contains(r.Body, []byte(f)) || strings.Contains(fmt.Sprint(r.Header), f) {
							t.Errorf("answer %d (%d) shows a value: %s", i, r.Code, r.Body)
						}
					}
				}
				for _, f := range forms {
					if strings.Contains(logs.String(), f) {
						t.Errorf("the log shows a value: %s", logs.String())
					}
				}
			}
		})
	}
}
