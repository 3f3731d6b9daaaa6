package api_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/minio/minio-go/v7"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

var testSecret = []byte("sless-api-test-secret-0123456789abcdef")

// env is one API server on loopback over the shared envtest apiserver and S3
// server, with a fresh namespace and bucket.
type env struct {
	t      *testing.T
	kube   *testbed.Kube
	ns     string
	url    string
	bucket string
	blobs  *s3.Client
	mc     *minio.Client
	srv    *api.Server
	auth   *auth.Verifier
	opts   api.Options
}

// testLimits keep archives small so the size rows of the bad-request table
// stay cheap; the benchmark uses the defaults.
var testLimits = source.Limits{MaxCompressed: 2 << 20, MaxUncompressed: 8 << 20, MaxEntries: 50}

func newEnv(t *testing.T, mods ...func(*api.Options)) *env {
	t.Helper()
	k := testbed.SharedKube(t)
	s3srv := testbed.SharedS3(t)
	e := &env{t: t, kube: k, ns: k.Namespace(t), bucket: s3srv.Bucket(t)}
	var err error
	e.blobs, err = s3.New(s3.Config{Endpoint: "http://" + s3srv.Endpoint, Region: s3srv.Region, Bucket: e.bucket,
		AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if e.mc, err = s3srv.Client(); err != nil {
		t.Fatal(err)
	}
	e.auth, err = auth.New(context.Background(), auth.Config{HS256Secret: testSecret, Issuer: "https://issuer.test", Audiences: []string{"sless"}})
	if err != nil {
		t.Fatal(err)
	}
	// The test bed's namespaces (t-…) are tenants' by their prefix, as a
	// deployment's would be by -tenant-namespace-prefixes.
	tenants := &kube.Tenants{Client: k.Client, Prefixes: []string{auth.DefaultNamespacePrefix, "t-"}}
	opts := api.Options{
		Objects: k.Client, Live: k.Client, Secrets: k.Client, Tenants: tenants, TenantNamespaces: tenants,
		Auth: e.auth, Blobs: e.blobs, Bucket: e.bucket, Limits: testLimits, DeleteWait: time.Second,
	}
	for _, m := range mods {
		m(&opts)
	}
	e.opts = opts
	e.srv, err = api.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(e.srv.Handler())
	t.Cleanup(hs.Close)
	e.url = hs.URL
	return e
}

// token is a valid HS256 token for sub; extra claims as key, value pairs.
// By default the token's namespace claim is the env's namespace.
func (e *env) token(sub string, extra ...any) string {
	c := jwt.MapClaims{"sub": sub, "iss": "https://issuer.test", "aud": "sless",
		"exp": time.Now().Add(time.Hour).Unix(), "sless.dev/namespace": e.ns}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == nil {
			delete(c, extra[i].(string))
			continue
		}
		c[extra[i].(string)] = extra[i+1]
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(testSecret)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

type response struct {
	Code   int
	Header http.Header
	Body   []byte
}

func (r *response) problem(t *testing.T) api.Problem {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != api.ProblemContentType {
		t.Fatalf("Content-Type = %q, want %s; body %s", ct, api.ProblemContentType, r.Body)
	}
	var p api.Problem
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("problem body: %v: %s", err, r.Body)
	}
	if p.Status != r.Code || p.Type == "" || p.Title == "" {
		t.Fatalf("problem %+v does not describe status %d", p, r.Code)
	}
	return p
}

// do sends a request. body is []byte or string as is, anything else as JSON.
// headers are name, value pairs; "Content-Type" defaults to application/json
// for bodies.
func (e *env) do(method, path, token string, body any, headers ...string) *response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &response{Code: resp.StatusCode, Header: resp.Header, Body: b}
}

func (e *env) path(kind string, name ...string) string {
	p := "/v1/namespaces/" + e.ns + "/" + kind
	for _, n := range name {
		p += "/" + n
	}
	return p
}

func decode[T any](t *testing.T, r *response) *T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, r.Body)
	}
	return &v
}

func want(t *testing.T, r *response, code int) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("status %d, want %d: %s", r.Code, code, r.Body)
	}
}

// pythonFunction is a valid Function body with inline code.
func pythonFunction(name string) map[string]any {
	return map[string]any{
		"apiVersion": "sless.dev/v1alpha1", "kind": "Function",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"team": "a"}},
		"spec": map[string]any{
			"runtime": "python3.12", "entrypoint": "main.handler",
			"source": map[string]any{"inline": map[string]any{"files": map[string]any{
				"main.py": "def handler(event, context):\n    return {'ok': True}\n"}}},
		},
	}
}

type zipEntry struct {
	name    string
	body    []byte
	mode    fs.FileMode
	method  uint16
	rawSize int64 // declared size override for lying headers; 0: real size
}

func makeZip(t testing.TB, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, en := range entries {
		h := &zip.FileHeader{Name: en.name, Method: zip.Deflate}
		if en.method != 0 {
			h.Method = en.method
		}
		if en.mode != 0 {
			h.SetMode(en.mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(en.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func pythonZip(t testing.TB, greeting string) []byte {
	return makeZip(t,
		zipEntry{name: "main.py", body: []byte("def handler(event, context):\n    return " + greeting + "\n")},
		zipEntry{name: "lib/util.py", body: []byte("X = 1\n")},
	)
}

func (e *env) getFunction(name string) *slessv1alpha1.Function {
	e.t.Helper()
	fn := &slessv1alpha1.Function{}
	if err := e.kube.Client.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, fn); err != nil {
		e.t.Fatalf("get function %s: %v", name, err)
	}
	return fn
}

// snapshot is every sless object of the env's namespace with its
// resourceVersion, and every object key in the bucket.
func (e *env) snapshot() []string {
	e.t.Helper()
	ctx := context.Background()
	var out []string
	for _, l := range []client.ObjectList{&slessv1alpha1.FunctionList{}, &slessv1alpha1.TriggerList{}, &slessv1alpha1.FunctionJobList{}} {
		if err := e.kube.Client.List(ctx, l, client.InNamespace(e.ns)); err != nil {
			e.t.Fatal(err)
		}
		switch l := l.(type) {
		case *slessv1alpha1.FunctionList:
			for _, o := range l.Items {
				out = append(out, "Function/"+o.Name+"@"+o.ResourceVersion)
			}
		case *slessv1alpha1.TriggerList:
			for _, o := range l.Items {
				out = append(out, "Trigger/"+o.Name+"@"+o.ResourceVersion)
			}
		case *slessv1alpha1.FunctionJobList:
			for _, o := range l.Items {
				out = append(out, "FunctionJob/"+o.Name+"@"+o.ResourceVersion)
			}
		}
	}
	for obj := range e.mc.ListObjects(ctx, e.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			e.t.Fatal(obj.Err)
		}
		out = append(out, "s3:"+obj.Key)
	}
	sort.Strings(out)
	return out
}

func (e *env) blobExists(key string) bool {
	e.t.Helper()
	ok, err := e.blobs.Exists(context.Background(), key)
	if err != nil {
		e.t.Fatal(err)
	}
	return ok
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
