// Package cluster_test is the first whole slice on the cluster path: a
// Function created through the REST API from an uploaded zip is built (the
// Tekton simulator) and served (the Knative simulator, whose URL points at
// the real runtime wrapper running the uploaded code as a local process),
// becomes Ready, answers through the invoke proxy, and leaves its record in
// PostgreSQL, listed back by the invocations API.
package cluster_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
	"github.com/golang-jwt/jwt/v5"
	"github.com/minio/minio-go/v7"
	"k8s.io/utils/ptr"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/adapter/postgres/postgrestest"
	"github.com/sless-dev/sless/pkg/adapter/resources"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/invoke"
	invokekube "github.com/sless-dev/sless/pkg/invoke/kube"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/runtimes"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testbed.Main(m)
}

var secret = []byte("sless-e2e-secret-0123456789abcdef0123")

const handler = `import json

def handler(event, context):
    return {"statusCode": 200, "headers": {"X-Made-By": "uploaded-code"},
            "body": {"greeting": "hello " + (event["body"] or {}).get("name", "nobody"),
                     "function": context.function_name, "path": event["path"]}}
`

func TestUploadedFunctionServesThroughProxy(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := testbed.SharedKube(t)
	s3srv := testbed.SharedS3(t)
	bucket := s3srv.Bucket(t)
	ns := k.Namespace(t)
	tekton, knative := testbed.SharedTekton(t), testbed.SharedKnative(t)
	_ = tekton // builds succeed at once by default
	blobs, err := s3.New(s3.Config{Endpoint: "http://" + s3srv.Endpoint, Region: s3srv.Region, Bucket: bucket,
		AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}

	// Knative, played by the simulator: a Service is served by the runtime
	// wrapper running the build context sless stored for it.
	knative.SetPolicy(ns, testbed.ServePolicy{URL: func(svc *servingv1.Service) string {
		u, err := serveBuildContext(t, s3srv, bucket, ns, svc.Name)
		if err != nil {
			t.Errorf("serve %s: %v", svc.Name, err)
			return "http://127.0.0.1:1"
		}
		return u
	}})

	// The Function controller.
	mgr, err := ctrl.NewManager(k.Config, ctrl.Options{
		Scheme: k.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := function.SetupWithManager(mgr, function.Options{
		Config:    function.Config{PublicBaseURL: "https://fn.e2e.test"},
		Resources: resources.Config{Registry: "registry.e2e.test/sless", RegistrySecret: "registry-push", S3Endpoint: "http://" + s3srv.Endpoint, S3Secret: "sless-s3"},
		Store:     blobs,
	}); err != nil {
		t.Fatal(err)
	}
	mgrDone := make(chan error, 1)
	mctx, stopMgr := context.WithCancel(ctx)
	go func() { mgrDone <- mgr.Start(mctx) }()
	defer func() { stopMgr(); <-mgrDone }()

	// sless api as frontdoor.NewCluster wires it: REST API, invoke proxy over
	// the informer resolver, records into PostgreSQL.
	pg := postgrestest.New(t)
	recorder := invoke.NewRecorder(pg, invoke.RecorderOptions{})
	defer recorder.Close(context.Background())
	verifier, err := auth.New(ctx, auth.Config{HS256Secret: secret, Audiences: []string{"sless"}})
	if err != nil {
		t.Fatal(err)
	}
	resolver, err := invokekube.Start(ctx, k.Config, k.Scheme, invokekube.Options{WatchRevisions: true, SyncTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := invoke.NewProxy(invoke.Options{Resolver: resolver, Recorder: recorder,
		Authenticator: invoke.AuthenticatorFunc(func(r *http.Request) (invoke.Identity, error) {
			id, err := verifier.Authenticate(r)
			if err != nil {
				return invoke.Identity{}, err
			}
			return invoke.Identity(*id), nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	list := invoke.ListHandler{History: pg}
	srv, err := api.New(api.Options{Objects: k.Client, Live: k.Client, Tenants: &kube.Tenants{Client: k.Client},
		Auth: verifier, Blobs: blobs, Bucket: bucket, Invoke: proxy,
		Invocations: func(c *gin.Context) { list.List(c.Writer, c.Request, c.Param("ns"), c.Param("name")) }})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(srv.Handler())
	defer front.Close()
	token := sign(t, jwt.MapClaims{"sub": "alice", "aud": "sless", "exp": time.Now().Add(time.Hour).Unix(), "sless.dev/namespace": ns})

	call := func(method, path string, body io.Reader, contentType string) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, front.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}

	// 1. Upload the zip for a Function not created yet: the API stores it
	// and names the archive to create the Function with.
	code, _, b := call("PUT", "/v1/namespaces/"+ns+"/functions/greeter/source", bytes.NewReader(makeZip(t, "main.py", handler)), "application/zip")
	if code != 200 {
		t.Fatalf("upload: %d %s", code, b)
	}
	var up api.UploadResult
	if err := json.Unmarshal(b, &up); err != nil {
		t.Fatal(err)
	}

	// 2. Create the Function from it.
	fnBody, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": "greeter"},
		"spec": map[string]any{"runtime": "python3.12", "entrypoint": "main.handler", "timeoutSeconds": 20,
			"source": map[string]any{"archive": up.Archive}},
	})
	if code, _, b := call("POST", "/v1/namespaces/"+ns+"/functions", bytes.NewReader(fnBody), "application/json"); code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}

	// 3. It becomes Ready.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, _, b := call("GET", "/v1/namespaces/"+ns+"/functions/greeter", nil, "")
		var fn struct {
			Status struct {
				Phase   string `json:"phase"`
				Address string `json:"address"`
				URL     string `json:"url"`
			} `json:"status"`
		}
		_ = json.Unmarshal(b, &fn)
		if code == 200 && fn.Status.Phase == "Ready" {
			t.Logf("Ready: address %s, url %s", fn.Status.Address, fn.Status.URL)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not Ready after 2 minutes: %d %s", code, b)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// 4. Invoke through the proxy: the function's own answer. The
	// resolver's cache may trail the status by a moment.
	var hdr http.Header
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, hdr, b = call("POST", "/fn/"+ns+"/greeter/orders/7?x=1", strings.NewReader(`{"name":"world"}`), "application/json")
		if code == 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != 200 || hdr.Get(invoke.ErrorHeader) != "" || hdr.Get("X-Made-By") != "uploaded-code" {
		t.Fatalf("invoke: %d %v %s", code, hdr, b)
	}
	var answer map[string]string
	if err := json.Unmarshal(b, &answer); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	if answer["greeting"] != "hello world" || answer["function"] != "greeter" || answer["path"] != "/orders/7" {
		t.Fatalf("answer %v", answer)
	}
	reqID := hdr.Get("X-Request-Id")

	// Private: without a token the proxy refuses.
	resp, err := http.Post(front.URL+"/fn/"+ns+"/greeter", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("anonymous invoke: %d", resp.StatusCode)
	}

	// 5. The record is in PostgreSQL, and the invocations API lists it.
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, _, b = call("GET", "/v1/namespaces/"+ns+"/functions/greeter/invocations?status=2xx", nil, "")
		var l invoke.InvocationList
		_ = json.Unmarshal(b, &l)
		if code == 200 && len(l.Items) == 1 {
			it := l.Items[0]
			if it.RequestID != reqID || it.Status != 200 || it.Trigger != invoke.TriggerHTTP || it.Revision == "" || it.BytesIn != 16 || it.BytesOut == 0 {
				t.Fatalf("record %+v", it)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("invocations: %d %s", code, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var n int
	if err := pg.Pool().QueryRow(ctx, "SELECT count(*) FROM invocations WHERE namespace = $1 AND function = 'greeter' AND request_id = $2", ns, reqID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows for the call: %d (%v)", n, err)
	}
}

func sign(t *testing.T, c jwt.MapClaims) string {
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func makeZip(t *testing.T, name, content string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, content)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// serveBuildContext fetches the build context sless stored for function
// ns/name from S3, unpacks it and runs the runtime wrapper on it as a local
// process; it returns the URL the wrapper serves once it is healthy.
func serveBuildContext(t *testing.T, s3srv *testbed.S3Server, bucket, ns, name string) (string, error) {
	mc, err := s3srv.Client()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var key string
	for obj := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: ns + "/" + name + "/context/", Recursive: true}) {
		if obj.Err != nil {
			return "", obj.Err
		}
		key = obj.Key
	}
	if key == "" {
		return "", fmt.Errorf("no build context stored under %s/%s/context/", ns, name)
	}
	o, err := mc.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return "", err
	}
	defer o.Close()
	dir := t.TempDir()
	if err := untar(o, dir); err != nil {
		return "", fmt.Errorf("unpack %s: %w", key, err)
	}
	port, err := testbed.FreePort()
	if err != nil {
		return "", err
	}
	cmd, err := runtimes.LocalCommand(dir, runtimes.LocalOptions{Port: port, FunctionName: name, Namespace: ns, TimeoutSeconds: 20})
	if err != nil {
		return "", err
	}
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	u := "http://127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := http.Get(u + "/_sless/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return u, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("wrapper not healthy on %s: %v", u, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func untar(r io.Reader, dir string) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("entry %q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
	}
}
