package api_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// paced is an upload body that sends chunk bytes of data every interval, as
// a slow or malicious client does, until it has sent them all or the test
// ends.
type paced struct {
	data     []byte
	chunk    int
	interval time.Duration
	done     <-chan struct{}
}

func (p *paced) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	select {
	case <-p.done:
		return 0, errors.New("test over")
	case <-time.After(p.interval):
	}
	n := copy(b[:min(len(b), p.chunk)], p.data)
	p.data = p.data[n:]
	return n, nil
}

// trickle sends zip a byte every 20 ms (50 B/s) until the test ends.
func trickle(t *testing.T, zip []byte) io.Reader {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return &paced{data: zip, chunk: 1, interval: 20 * time.Millisecond, done: done}
}

// bulkyZip is a Python function with incompressible padding: size bytes of
// zip that take a paced body a while to send.
func bulkyZip(t *testing.T, size int) []byte {
	pad := make([]byte, size)
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(pad)
	return makeZip(t,
		zipEntry{name: "main.py", body: []byte("def handler(event, context):\n    return 'bulky'\n")},
		zipEntry{name: "pad.bin", body: pad},
	)
}

// uploadTo is startUpload for a function of any namespace.
func (e *env) uploadTo(tok, ns, name string, body io.Reader) chan *response {
	e.t.Helper()
	return e.start("PUT", "/v1/namespaces/"+ns+"/functions/"+name+"/source", tok, "application/zip", body)
}

// start sends a request with body and answers on the channel, so a test
// can wait for an answer it expects to be held back.
func (e *env) start(method, path, tok, contentType string, body io.Reader) chan *response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", contentType)
	reply := make(chan *response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			reply <- &response{Code: -1, Body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		reply <- &response{Code: resp.StatusCode, Header: resp.Header, Body: b}
	}()
	return reply
}

// answer waits for an upload's answer, at most limit.
func answer(t *testing.T, reply chan *response, limit time.Duration, what string) *response {
	t.Helper()
	select {
	case r := <-reply:
		return r
	case <-time.After(limit):
		t.Fatalf("%s: no answer within %s", what, limit)
		return nil
	}
}

// TestTenantShareLeavesSlotsForOthers: one tenant opens as many trickling
// uploads as the server has slots. It gets its share, its upload past the
// share is answered 429 (not queued ahead of anyone), and another tenant's
// upload still lands. Before, the trickles held every slot and the other
// tenant got 503.
func TestTenantShareLeavesSlotsForOthers(t *testing.T) {
	const queueWait = 300 * time.Millisecond
	e := newEnv(t, func(o *api.Options) {
		o.MaxUploads, o.MaxUploadsPerTenant, o.UploadQueueWait = 3, 2, queueWait
		o.UploadMinRate = -1 // the share alone, not the rate, keeps the slots here
	})
	alice := e.token("alice")
	nsB := e.kube.Namespace(t)
	bob := e.token("bob", "sless.dev/namespace", nsB)
	for _, name := range []string{"a0", "a1", "a2"} {
		want(t, e.do("POST", e.path("functions"), alice, pythonFunction(name)), http.StatusCreated)
	}
	want(t, e.do("POST", "/v1/namespaces/"+nsB+"/functions", bob, pythonFunction("b0")), http.StatusCreated)
	zip := bulkyZip(t, 64<<10)

	e.uploadTo(alice, e.ns, "a0", trickle(t, zip))
	e.uploadTo(alice, e.ns, "a1", trickle(t, zip))
	e.awaitMetric("sless_api_source_uploads_in_progress 2")
	start := time.Now()
	select {
	case r := <-e.uploadTo(alice, e.ns, "a2", trickle(t, zip)):
		want(t, r, http.StatusTooManyRequests)
		if p := r.problem(t); !strings.HasSuffix(p.Type, "/tenant-busy") || !strings.Contains(p.Detail, e.ns) {
			t.Fatalf("problem %s", r.Body)
		}
		if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
			t.Fatalf("Retry-After = %q", r.Header.Get("Retry-After"))
		}
		if waited := time.Since(start); waited < queueWait {
			t.Fatalf("refused after %s, before the queue wait of %s", waited, queueWait)
		}
		e.awaitMetric(`sless_api_source_uploads_total{result="tenant-busy"} 1`)
	case <-time.After(10 * time.Second):
		// Go on: the other tenant's answer shows what that costs.
		t.Errorf("a third trickle of one tenant was not refused within 10s: it holds the last slot")
	}

	// The other tenant's upload takes the slot the trickles left.
	bZip := pythonZip(t, `"b"`)
	r := answer(t, e.uploadTo(bob, nsB, "b0", bytes.NewReader(bZip)), 10*time.Second, "the other tenant's upload")
	want(t, r, http.StatusOK)
	fn := &slessv1alpha1.Function{}
	if err := e.kube.Client.Get(context.Background(), client.ObjectKey{Namespace: nsB, Name: "b0"}, fn); err != nil {
		t.Fatal(err)
	}
	if a := fn.Spec.Source.Archive; a == nil || a.SHA256 != sha256hex(bZip) {
		t.Fatalf("the other tenant's upload did not land: %+v", a)
	}
}

// TestSlowUploadIsCutOff: an upload that sends a byte every 20 ms never
// trips the idle timeout, but once it holds a slot it must send
// UploadMinRate averaged over UploadRateWindow: it is answered 408 after the
// first window, its slot serves the next upload, and nothing was stored. An
// upload that is slow but above the rate, over several windows, lands.
func TestSlowUploadIsCutOff(t *testing.T) {
	const window = time.Second
	e := newEnv(t, func(o *api.Options) {
		o.MaxUploads, o.UploadQueueWait = 1, time.Minute
		o.UploadMinRate, o.UploadRateWindow = 2000, window
	})
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("slow")), http.StatusCreated)
	before := e.snapshot()
	zip := bulkyZip(t, 300<<10)

	start := time.Now()
	r := answer(t, e.uploadTo(tok, e.ns, "slow", trickle(t, zip)), 15*window, "a trickling upload")
	took := time.Since(start)
	want(t, r, http.StatusRequestTimeout)
	if p := r.problem(t); !strings.HasSuffix(p.Type, "/body-too-slow") || len(p.Errors) == 0 || p.Errors[0].Field != "body" {
		t.Fatalf("problem %s", r.Body)
	}
	if took < window {
		t.Fatalf("cut after %s, before the first window of %s", took, window)
	}
	if after := e.snapshot(); !slices.Equal(before, after) {
		t.Fatalf("a cut upload changed the world:\nbefore %v\nafter  %v", before, after)
	}
	e.awaitMetric(`sless_api_source_uploads_total{result="too-slow"} 1`)
	e.awaitMetric("sless_api_source_uploads_in_progress 0")

	// 200 KB/s over 1.5 s: slow, but a hundred times the floor.
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	r = answer(t, e.uploadTo(tok, e.ns, "slow", &paced{data: zip, chunk: 2 << 10, interval: 10 * time.Millisecond, done: done}), 30*window, "a slow upload above the rate")
	want(t, r, http.StatusOK)
	if a := e.getFunction("slow").Spec.Source.Archive; a == nil || a.SHA256 != sha256hex(zip) {
		t.Fatalf("the upload above the rate did not land: %+v", a)
	}
}
