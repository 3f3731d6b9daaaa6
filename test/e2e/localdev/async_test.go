package localdev_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

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
// Idempotency-Key repeat runs nothing.
func TestAsyncCallsThroughDev(t *testing.T) {
	data := t.TempDir()
	d := startDevIn(t, data, time.Minute)
	d.createPython("sleeper", "import time\ndef handler(event, context):\n    time.sleep(2)\n    return {'got': event['body']}\n",
		`{"async": {"concurrency": 1}}`)
	d.createPython("failer", "def handler(event, context):\n    raise RuntimeError('always broken')\n",
		`{"async": {"maxRetries": 2}}`)
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
	d.stop()
	d2 := startDevIn(t, data, time.Minute)
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

	// A function that always fails: three attempts, then dead-lettered.
	bad, _ := d2.submitAsync("failer", `{}`)
	rec = d2.awaitAsync("failer", bad, 2*time.Minute)
	if rec.State != "dead-lettered" || rec.Attempts != 3 || !strings.Contains(rec.LastError, "500") {
		t.Fatalf("failing call: %+v", rec)
	}
	code, b = d2.do("GET", "/v1/namespaces/e2e/functions/failer/invocations?mode=async&state=dead-lettered", "", nil)
	if code != 200 || !strings.Contains(string(b), bad) {
		t.Fatalf("dead letters: %d %s", code, b)
	}

	// The command line: --async --wait prints the function's answer,
	// history --async the calls with their states.
	home := t.TempDir()
	sless := func(args ...string) (string, error) {
		cmd := exec.Command(slessBin, args...)
		cmd.Env = append(os.Environ(), "SLESS_SERVER="+d2.base, "SLESS_TOKEN="+d2.token, "SLESS_NAMESPACE=e2e",
			"SLESS_CONFIG="+filepath.Join(home, "config"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
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
