package localdev_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// posted is a callback a receiver got.
type posted struct {
	path, signature string
	body            []byte
}

// receiver takes callbacks on 127.0.0.1 and hands them over.
func receiver(t *testing.T) (string, chan posted) {
	got := make(chan posted, 20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- posted{path: r.URL.Path, signature: r.Header.Get("Sless-Signature"), body: b}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

// verify checks a callback's signature as docs/invoke.md tells a receiver to.
func verify(key, header string, body []byte) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return fmt.Errorf("timestamp %q", ts)
	}
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(ts + "."))
	m.Write(body)
	want := hex.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return fmt.Errorf("v1 %q, want %q", sig, want)
	}
	return nil
}

// awaitPosted waits for the next callback.
func awaitPosted(t *testing.T, got chan posted) posted {
	t.Helper()
	select {
	case p := <-got:
		return p
	case <-time.After(time.Minute):
		t.Fatal("no callback within a minute")
		return posted{}
	}
}

// submitAsync makes an asynchronous call of /fn/e2e/{name} and returns its
// request id and how long the 202 took.
func (d *dev) submitAsync(name, body string, header ...string) (string, time.Duration) {
	d.t.Helper()
	req, err := http.NewRequest("POST", d.base+"/fn/e2e/"+name, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "respond-async")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	began := time.Now()
	resp, err := http.DefaultClient.Do(req)
	took := time.Since(began)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	id := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != 202 || resp.Header.Get("Preference-Applied") != "respond-async" || id == "" ||
		resp.Header.Get("Location") != d.base+"/v1/namespaces/e2e/functions/"+name+"/invocations/"+id || !bytes.Contains(b, []byte(id)) {
		d.t.Fatalf("submit: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	return id, took
}

type asyncRecord struct {
	RequestID string `json:"requestId"`
	State     string `json:"state"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"lastError"`
	Response  *struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	} `json:"response"`
	Callback *struct {
		URL      string `json:"url"`
		State    string `json:"state"`
		Attempts int    `json:"attempts"`
	} `json:"callback"`
}

func (d *dev) asyncRecord(name, id, query string) asyncRecord {
	d.t.Helper()
	code, b := d.do("GET", "/v1/namespaces/e2e/functions/"+name+"/invocations/"+id+query, "", nil)
	var rec asyncRecord
	if code != 200 || json.Unmarshal(b, &rec) != nil {
		d.t.Fatalf("record %s: %d %s", id, code, b)
	}
	return rec
}

// awaitAsync long-polls until the call is final.
func (d *dev) awaitAsync(name, id string, within time.Duration) asyncRecord {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec := d.asyncRecord(name, id, "?wait=30s")
		if rec.State == "succeeded" || rec.State == "failed" || rec.State == "dead-lettered" {
			return rec
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("call %s still %s after %s", id, rec.State, within)
		}
	}
}

func (d *dev) createPython(name, code, extra string) {
	d.t.Helper()
	spec := map[string]any{"runtime": "python3.12", "entrypoint": "main.handler",
		"source": map[string]any{"inline": map[string]any{"files": map[string]string{"main.py": code}}}}
	if extra != "" {
		var more map[string]any
		if err := json.Unmarshal([]byte(extra), &more); err != nil {
			d.t.Fatal(err)
		}
		for k, v := range more {
			spec[k] = v
		}
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": name}, "spec": spec})
	if code, b := d.do("POST", "/v1/namespaces/e2e/functions", "application/json", body); code != 201 {
		d.t.Fatalf("create %s: %d %s", name, code, b)
	}
}

// An asynchronous call is answered before the function (which sleeps 2 s)
// runs; its record goes from queued or running to succeeded with the body.
// Calls kept when sless dev stops run after it starts again, each once in
// the list; a failing function is dead-lettered after its retries, and an
// Idempotency-Key repeat runs nothing. Callbacks: without --callback-allow
// a callback to 127.0.0.1 is refused; with it a signed result arrives there
// and verifies with the key `sless callbacks key` prints, and the failing
// function's dead letter goes to its onFailure.
func TestAsyncCallsThroughDev(t *testing.T) {
	data := t.TempDir()
	hooks, posts := receiver(t)
	d := startDevIn(t, data, time.Minute)
	d.createPython("sleeper", "import time\ndef handler(event, context):\n    time.sleep(2)\n    return {'got': event['body']}\n",
		`{"async": {"concurrency": 1}}`)
	d.createPython("failer", "def handler(event, context):\n    raise RuntimeError('always broken')\n",
		`{"async": {"maxRetries": 2, "onFailure": "`+hooks+`/failed"}}`)
	d.awaitReady("e2e", "sleeper", 3*time.Minute)
	d.awaitReady("e2e", "failer", 3*time.Minute)

	id, took := d.submitAsync("sleeper", `{"n": 1}`)
	t.Logf("202 after %s", took)
	if took > time.Second {
		t.Fatalf("the 202 took %s, as long as running the call", took)
	}
	if rec := d.asyncRecord("sleeper", id, ""); rec.State != "queued" && rec.State != "running" {
		t.Fatalf("right after the 202: %+v", rec)
	}
	rec := d.awaitAsync("sleeper", id, time.Minute)
	if rec.State != "succeeded" || rec.Attempts != 1 || rec.Response == nil || rec.Response.Status != 200 ||
		!strings.Contains(rec.Response.Body, `"n": 1`) {
		t.Fatalf("record: %+v %+v", rec, rec.Response)
	}

	// Repeat with the same key: the first call's id, one run.
	first, _ := d.submitAsync("sleeper", `{"n": 2}`, "Idempotency-Key", "k-1")
	again, _ := d.submitAsync("sleeper", `{"n": 2}`, "Idempotency-Key", "k-1")
	if again != first {
		t.Fatalf("the repeat is %s, the first %s", again, first)
	}

	// Three calls queue behind concurrency 1; sless dev stops before they
	// have run, and the next one runs them.
	ids := []string{first}
	for i := range 3 {
		id, _ := d.submitAsync("sleeper", fmt.Sprintf(`{"n": %d}`, 3+i))
		ids = append(ids, id)
	}
	// No allow-list: a callback to loopback is refused before anything is kept.
	req, _ := http.NewRequest("POST", d.base+"/fn/e2e/sleeper", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Prefer", "respond-async")
	req.Header.Set("X-Callback-Url", hooks+"/done")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(string(b), "CallbackUrlRefused") || !strings.Contains(string(b), "loopback") {
		t.Fatalf("callback to 127.0.0.1 without the allow-list: %d %s", resp.StatusCode, b)
	}

	d.stop()
	d2 := startDevIn(t, data, time.Minute, "--callback-allow", "127.0.0.1")
	for _, id := range ids {
		if rec := d2.awaitAsync("sleeper", id, 2*time.Minute); rec.State != "succeeded" {
			t.Fatalf("%s after the restart: %+v", id, rec)
		}
	}
	code, b := d2.do("GET", "/v1/namespaces/e2e/functions/sleeper/invocations?mode=async&limit=100", "", nil)
	var list struct{ Items []asyncRecord }
	if code != 200 || json.Unmarshal(b, &list) != nil {
		t.Fatalf("list: %d %s", code, b)
	}
	var listed []string
	for _, it := range list.Items {
		listed = append(listed, it.RequestID)
	}
	slices.Sort(listed)
	want := append([]string{id}, ids...)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("listed %v, want each of %v once", listed, want)
	}

	// The same namespace key before and after, read as a user does.
	home := t.TempDir()
	sless := func(args ...string) (string, error) {
		cmd := exec.Command(slessBin, args...)
		cmd.Env = append(os.Environ(), "SLESS_SERVER="+d2.base, "SLESS_TOKEN="+d2.token, "SLESS_NAMESPACE=e2e",
			"SLESS_CONFIG="+filepath.Join(home, "config"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := sless("callbacks", "key")
	key := strings.TrimSpace(out)
	if err != nil || !strings.HasPrefix(key, "slcb_") {
		t.Fatalf("sless callbacks key: %v: %s", err, out)
	}

	// With the allow-list: a signed result arrives at 127.0.0.1.
	withHook, _ := d2.submitAsync("sleeper", `{"n": "hook"}`, "X-Callback-Url", hooks+"/done")
	p := awaitPosted(t, posts)
	var result struct {
		RequestID, Namespace, Function, State string
		Attempts                              int
		Response                              struct {
			Status int
			Body   string
		}
	}
	if err := json.Unmarshal(p.body, &result); err != nil || p.path != "/done" || result.RequestID != withHook ||
		result.Namespace != "e2e" || result.Function != "sleeper" || result.State != "succeeded" || result.Attempts != 1 ||
		result.Response.Status != 200 || !strings.Contains(result.Response.Body, `"n": "hook"`) {
		t.Fatalf("callback %s: %s (%v)", p.path, p.body, err)
	}
	if err := verify(key, p.signature, p.body); err != nil {
		t.Fatalf("signature %q does not verify: %v", p.signature, err)
	}
	if err := verify(key, p.signature, append(p.body, ' ')); err == nil {
		t.Fatal("a changed body verifies")
	}
	if rec := d2.awaitAsync("sleeper", withHook, time.Minute); rec.Callback == nil || rec.Callback.URL != hooks+"/done" {
		t.Fatalf("record of the call with a callback: %+v", rec)
	}

	// A function that always fails: three attempts, then dead-lettered,
	// and its onFailure told.
	bad, _ := d2.submitAsync("failer", `{}`)
	rec = d2.awaitAsync("failer", bad, 2*time.Minute)
	if rec.State != "dead-lettered" || rec.Attempts != 3 || !strings.Contains(rec.LastError, "500") {
		t.Fatalf("failing call: %+v", rec)
	}
	p = awaitPosted(t, posts)
	if err := json.Unmarshal(p.body, &result); err != nil || p.path != "/failed" || result.RequestID != bad || result.State != "dead-lettered" ||
		result.Attempts != 3 || verify(key, p.signature, p.body) != nil {
		t.Fatalf("onFailure callback %s: %s (%v)", p.path, p.body, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		rec = d2.asyncRecord("failer", bad, "")
		if rec.Callback != nil && rec.Callback.State == "delivered" && rec.Callback.Attempts == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead letter's callback: %+v", rec.Callback)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, b = d2.do("GET", "/v1/namespaces/e2e/functions/failer/invocations?mode=async&state=dead-lettered", "", nil)
	if code != 200 || !strings.Contains(string(b), bad) {
		t.Fatalf("dead letters: %d %s", code, b)
	}

	// The command line: --async --wait prints the function's answer,
	// history --async the calls with their states.
	if out, err := sless("invoke", "sleeper", "--async", "--wait", "-d", `{"cli": true}`); err != nil || !strings.Contains(out, `"cli": true`) {
		t.Fatalf("sless invoke --async --wait: %v: %s", err, out)
	}
	if out, err := sless("invoke", "failer", "--async", "--wait"); err == nil || !strings.Contains(out, "dead-lettered after 3 attempts") {
		t.Fatalf("sless invoke --async --wait of a failing function: %v: %s", err, out)
	}
	if out, err := sless("history", "failer", "--async", "--state", "dead-lettered"); err != nil || !strings.Contains(out, bad) {
		t.Fatalf("sless history --async: %v: %s", err, out)
	}
}
