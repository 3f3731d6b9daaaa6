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

	"github.com/golang-jwt/jwt/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

const zipTarget = 50 << 20

// bigZip is a 50 MiB function archive: a handler and 200 files of 256 KiB of
// random bytes, stored (random data does not deflate, as with vendored
// binaries). nonce changes the handler, so each archive has its own digest.
func bigZip(b *testing.B, payload [][]byte, nonce int) []byte {
	b.Helper()
	var buf bytes.Buffer
	buf.Grow(zipTarget + 1<<20)
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
	k := testbed.SharedKube(b)
	s3srv := testbed.SharedS3(b)
	ns := k.Namespace(b)
	bucket := s3srv.Bucket(b)
	blobs, err := s3.New(s3.Config{Endpoint: "http://" + s3srv.Endpoint, Region: s3srv.Region, Bucket: bucket,
		AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, PathStyle: true})
	if err != nil {
		b.Fatal(err)
	}
	secret := []byte("bench-secret-0123456789abcdef0123456789")
	verifier, err := auth.New(context.Background(), auth.Config{HS256Secret: secret})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := api.New(api.Options{Objects: k.Client, Auth: verifier, Blobs: blobs, Bucket: bucket})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "bench", "exp": time.Now().Add(time.Hour).Unix(),
		"sless.dev/namespace": ns}).SignedString(secret)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"},
		Spec: slessv1alpha1.FunctionSpec{Runtime: "python3.12", Entrypoint: "main.handler",
			Source: slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "def handler(e, c):\n    return 0\n"}}}}}
	if err := k.Client.Create(ctx, fn); err != nil {
		b.Fatal(err)
	}

	payload := make([][]byte, 200)
	for i := range payload {
		payload[i] = make([]byte, 256<<10)
		_, _ = rand.Read(payload[i])
	}
	url := hs.URL + "/v1/namespaces/" + ns + "/functions/big/source"

	var direct, viaAPI, validate, buildCtx time.Duration
	var size int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		z := bigZip(b, payload, i)
		size = int64(len(z))
		b.StartTimer()

		start := time.Now()
		if err := blobs.Put(ctx, fmt.Sprintf("direct/%d.zip", i), bytes.NewReader(z), int64(len(z)), "application/zip"); err != nil {
			b.Fatal(err)
		}
		direct += time.Since(start)

		start = time.Now()
		req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(z))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/zip")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"changed":true`)) {
			b.Fatalf("upload %d: %d %s", i, resp.StatusCode, body)
		}
		viaAPI += time.Since(start)

		// The CPU share, in-process: validating the zip, then making the
		// build context (pkg/source), which the API does before storing.
		start = time.Now()
		files, err := source.ReadZip(bytes.NewReader(z), int64(len(z)), source.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		validate += time.Since(start)
		start = time.Now()
		if _, err := source.BuildContext(source.Input{Runtime: "python3.12", Entrypoint: "main.handler", Files: files}); err != nil {
			b.Fatal(err)
		}
		buildCtx += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(direct.Milliseconds())/n, "direct-put-ms/op")
	b.ReportMetric(float64(viaAPI.Milliseconds())/n, "api-upload-ms/op")
	b.ReportMetric(float64(validate.Milliseconds())/n, "readzip-ms/op")
	b.ReportMetric(float64(buildCtx.Milliseconds())/n, "buildcontext-ms/op")
	b.ReportMetric(float64(viaAPI)/float64(direct), "api/direct")
	b.ReportMetric(float64(size)/(1<<20)/(viaAPI.Seconds()/n), "api-MiB/s")
	b.ReportMetric(float64(size)/(1<<20)/(direct.Seconds()/n), "direct-MiB/s")
}
