// Package api benchmarks the REST API's source upload against the S3 server
// it writes to, so the figure is a ratio that holds on any machine.
//
//	go test -run '^$' -bench . -benchtime 3x ./bench/api/
package api

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/golang-jwt/jwt/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) {
	// controller-runtime warns on stderr when no logger is set.
	ctrllog.SetLogger(logr.Discard())
	testbed.Main(m)
}

// bigZip is a function archive: a handler and the payload's files (200 of
// 256 KiB make 50 MiB) of random bytes, stored (random data does not deflate, as with vendored
// binaries). nonce changes the handler, so each archive has its own digest.
func bigZip(b testing.TB, payload [][]byte, nonce int) []byte {
	b.Helper()
	var buf bytes.Buffer
	buf.Grow(len(payload)*(256<<10) + 1<<20)
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("main.py")
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(w, "NONCE = %d\n\ndef handler(event, context):\n    return NONCE\n", nonce)
	for i, p := range payload {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("assets/blob-%03d.bin", i), Method: zip.Store})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Write(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkUpload50MiB times, in the same run and against the same S3
// server: (a) putting a 50 MiB zip into S3 directly with the same client
// code the API uses, and (b) PUT …/source of the same-sized zip through the
// API, which validates the zip, makes the build context, stores both and
// updates the Function. It reports each time and their ratio, plus the
// validation and context-building share measured in-process.
func BenchmarkUpload50MiB(b *testing.B) {
	r := upload(b, b.N, 200, b.ResetTimer)
	n := float64(b.N)
	b.ReportMetric(float64(r.direct.Milliseconds())/n, "direct-put-ms/op")
	b.ReportMetric(float64(r.viaAPI.Milliseconds())/n, "api-upload-ms/op")
	b.ReportMetric(float64(r.validate.Milliseconds())/n, "readzip-ms/op")
	b.ReportMetric(float64(r.buildCtx.Milliseconds())/n, "buildcontext-ms/op")
	b.ReportMetric(float64(r.viaAPI)/float64(r.direct), "api/direct")
	b.ReportMetric(float64(r.size)/(1<<20)/(r.viaAPI.Seconds()/n), "api-MiB/s")
	b.ReportMetric(float64(r.size)/(1<<20)/(r.direct.Seconds()/n), "direct-MiB/s")
}

// TestBenchSmoke runs the benchmark's code path once with a 2 MiB zip, so
// that it cannot rot; the numbers are for the README, not for a test.
func TestBenchSmoke(t *testing.T) {
	r := upload(t, 1, 8, func() {})
	t.Logf("%d bytes: direct put %v, through the API %v, zip check %v, build context %v", r.size, r.direct, r.viaAPI, r.validate, r.buildCtx)
	if r.size < 2<<20 || r.direct <= 0 || r.viaAPI <= 0 || r.validate <= 0 || r.buildCtx <= 0 {
		t.Errorf("not every number measured: %+v", r)
	}
}

// uploadResult is the time each way of storing the archives took in all.
type uploadResult struct {
	direct, viaAPI, validate, buildCtx time.Duration
	size                               int64
}

// upload stores rounds archives of blobs files of 256 KiB each way; reset
// is called once the set-up is done.
func upload(tb testing.TB, rounds, blobs int, reset func()) uploadResult {
	k := testbed.SharedKube(tb)
	s3srv := testbed.SharedS3(tb)
	ns := k.Namespace(tb)
	bucket := s3srv.Bucket(tb)
	store, err := s3.New(s3.Config{Endpoint: "http://" + s3srv.Endpoint, Region: s3srv.Region, Bucket: bucket,
		AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, PathStyle: true})
	if err != nil {
		tb.Fatal(err)
	}
	secret := []byte("bench-secret-0123456789abcdef0123456789")
	verifier, err := auth.New(context.Background(), auth.Config{HS256Secret: secret})
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := api.New(api.Options{Objects: k.Client, Auth: verifier, Blobs: store, Bucket: bucket})
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "bench", "exp": time.Now().Add(time.Hour).Unix(),
		"sless.dev/namespace": ns}).SignedString(secret)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "def handler(e, c):\n    return 0\n"}}},
			},
		}}
	if err := k.Client.Create(ctx, fn); err != nil {
		tb.Fatal(err)
	}

	payload := make([][]byte, blobs)
	for i := range payload {
		payload[i] = make([]byte, 256<<10)
		_, _ = rand.Read(payload[i])
	}
	url := hs.URL + "/v1/namespaces/" + ns + "/functions/big/source"

	var r uploadResult
	reset()
	for i := 0; i < rounds; i++ {
		z := bigZip(tb, payload, i)
		r.size = int64(len(z))

		start := time.Now()
		if err := store.Put(ctx, fmt.Sprintf("direct/%d.zip", i), bytes.NewReader(z), int64(len(z)), "application/zip"); err != nil {
			tb.Fatal(err)
		}
		r.direct += time.Since(start)

		start = time.Now()
		req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(z))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/zip")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"changed":true`)) {
			tb.Fatalf("upload %d: %d %s", i, resp.StatusCode, body)
		}
		r.viaAPI += time.Since(start)

		// The CPU share, in-process: validating the zip, then making the
		// build context (pkg/source), which the API does before storing.
		start = time.Now()
		files, err := source.ReadZip(bytes.NewReader(z), int64(len(z)), source.Limits{})
		if err != nil {
			tb.Fatal(err)
		}
		r.validate += time.Since(start)
		start = time.Now()
		if _, err := source.BuildContext(source.Input{Runtime: "python3.12", Entrypoint: "main.handler", Files: files}); err != nil {
			tb.Fatal(err)
		}
		r.buildCtx += time.Since(start)
	}
	return r
}
