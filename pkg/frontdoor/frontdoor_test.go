package frontdoor_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/frontdoor"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/blobs"
)

// testToken is the admin token of the doors openDoor makes.
const testToken = "frontdoor-test-token-0123"

// openDoor makes a front door over a local store, with proxy's options and
// records kept in the store, whose history it returns too.
func openDoor(ctx context.Context, t *testing.T, proxy invoke.Options, console bool) (*frontdoor.Door, invoke.History) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := slessv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	store, err := apiserver.Open(filepath.Join(t.TempDir(), "sless.db"), scheme)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	blobs, err := blobs.New(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := store.Records()
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := auth.New(ctx, auth.Config{DevToken: testToken, DevIdentity: auth.Identity{Subject: "dev", Namespace: "default", Admin: true}})
	if err != nil {
		t.Fatal(err)
	}
	door, err := frontdoor.New(ctx, frontdoor.Options{
		API:             api.Options{Objects: store, Auth: verifier, Blobs: blobs, Bucket: local.Bucket},
		Auth:            verifier,
		Proxy:           proxy,
		Records:         frontdoor.Records{Sink: recs, History: recs},
		IdleConnTimeout: time.Minute,
		Console:         console,
	})
	if err != nil {
		t.Fatal(err)
	}
	return door, recs
}

// TestDoorServesAndStops: one front door serves the API, /metrics with the
// proxy's series, the console and the invoke path on one listener, records
// a call, and Serve returns nil once its context is done.
func TestDoorServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// No function exists: the proxy answers 404 without calling one.
	none := invoke.ResolverFunc(func(context.Context, string, string) (invoke.Target, error) {
		return invoke.Target{}, invoke.ErrNotFound
	})
	door, _ := openDoor(ctx, t, invoke.Options{Resolver: none, Services: none}, true)
	defer door.Close()
	if door.Recorder() == nil {
		t.Fatal("no recorder with a Sink")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- door.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	get := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if code, body := get("/v1/namespaces/default/functions"); code != http.StatusOK {
		t.Fatalf("list functions: %d %s", code, body)
	}
	if code, body := get("/fn/default/nope"); code != http.StatusNotFound {
		t.Fatalf("call of a missing function: %d %s", code, body)
	}
	// A door without Async keeps no asynchronous calls, and says so.
	if code, body := get("/v1/namespaces/default/functions/f/invocations/some-id"); code != http.StatusNotImplemented || !strings.Contains(body, "respond-async") {
		t.Fatalf("an asynchronous call's record: %d %s", code, body)
	}
	if code, _ := get("/console/"); code >= 500 || code == http.StatusNotFound {
		t.Fatalf("/console/: %d", code)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics: %d, go_goroutines missing", code)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve after its context ended: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

// TestServeDoorsStopsBoth: both doors serve, and one failing stops the
// other, so no replica keeps answering probes with half its doors.
func TestServeDoorsStopsBoth(t *testing.T) {
	ctx := context.Background()
	none := invoke.ResolverFunc(func(context.Context, string, string) (invoke.Target, error) {
		return invoke.Target{}, invoke.ErrNotFound
	})
	door, _ := openDoor(ctx, t, invoke.Options{Resolver: none, Services: none}, false)
	defer door.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- door.ServeDoors(ctx, ln, pub) }()
	for _, l := range []net.Listener{ln, pub} {
		resp, err := http.Get("http://" + l.Addr().String() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz at %s: %d", l.Addr(), resp.StatusCode)
		}
	}
	pub.Close()
	select {
	case err := <-served:
		if err == nil {
			t.Fatal("ServeDoors after the public door failed: nil error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cluster-local door kept serving after the public door failed")
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Error("the cluster-local door still answers")
	}
}
