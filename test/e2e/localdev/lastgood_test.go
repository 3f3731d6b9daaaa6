package localdev_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A Function whose latest update fails — its new revision cannot start, or
// its new source does not build — keeps its last ready revision serving, as
// on a cluster, and still does after sless dev restarts on the same data
// directory, with a status that names that revision.
func TestLastReadyRevisionSurvivesFailedUpdateAndRestart(t *testing.T) {
	data := t.TempDir()
	d := startDevIn(t, data, time.Minute)

	cases := []struct {
		name, runtime, entrypoint string
		good, bad                 map[string]string
		// startFails: the bad code builds but its revision cannot start;
		// else its build fails.
		startFails bool
		failure    string
	}{
		{
			name: "start-fails", runtime: "python3.12", entrypoint: "main.handler",
			good:       map[string]string{"main.py": "def handler(event, context):\n    return {'version': 'good'}\n"},
			bad:        map[string]string{"main.py": "raise RuntimeError('broken at import')\ndef handler(event, context):\n    return {'version': 'bad'}\n"},
			startFails: true, failure: "broken at import",
		},
		{
			name: "build-fails", runtime: "go1.24", entrypoint: "hello.Handle",
			good: map[string]string{
				"go.mod":   "module example.com/hello\n\ngo 1.24\n",
				"hello.go": "package hello\n\nimport \"context\"\n\nfunc Handle(ctx context.Context, ev map[string]any) (map[string]string, error) {\n\treturn map[string]string{\"version\": \"good\"}, nil\n}\n",
			},
			bad: map[string]string{
				"go.mod":   "module example.com/hello\n\ngo 1.24\n",
				"hello.go": "package hello\n\nfunc Handle( {\n",
			},
		},
	}
	item := func(name string) string { return "/v1/namespaces/e2e/functions/" + name }
	get := func(d *dev, name string) (fnStatus, string) {
		t.Helper()
		code, b := d.do("GET", item(name), "", nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", name, code, b)
		}
		var fn fnStatus
		if err := json.Unmarshal(b, &fn); err != nil {
			t.Fatal(err)
		}
		return fn, string(b)
	}
	// answersGood calls the function until it answers the good code's
	// version (a restarted server may answer 503 for a moment).
	answersGood := func(d *dev, name string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, b := d.do("GET", "/fn/e2e/"+name, "", nil)
			var a answer
			if code == 200 && json.Unmarshal(b, &a) == nil && a.Version == "good" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s does not answer with its last ready revision: %d %s", name, code, b)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	serviceReady := func(fn fnStatus) (status, reason, message string) {
		for _, c := range fn.Status.Conditions {
			if c.Type == "ServiceReady" {
				return c.Status, c.Reason, c.Message
			}
		}
		return "", "", ""
	}

	for _, c := range cases {
		body, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"name": c.name},
			"spec": map[string]any{"runtime": c.runtime, "entrypoint": c.entrypoint,
				"source": map[string]any{"inline": map[string]any{"files": c.good}}},
		})
		if code, b := d.do("POST", "/v1/namespaces/e2e/functions", "application/json", body); code != 201 {
			t.Fatalf("create %s: %d %s", c.name, code, b)
		}
	}
	for _, c := range cases {
		fn := d.awaitReady("e2e", c.name, 5*time.Minute)
		if want := c.name + "-00001"; fn.Status.LatestReadyRevision != want {
			t.Fatalf("%s: latestReadyRevision %q, want %q", c.name, fn.Status.LatestReadyRevision, want)
		}
		answersGood(d, c.name)
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"source": map[string]any{"inline": map[string]any{"files": c.bad}}}})
		if code, b := d.do("PATCH", item(c.name), "application/merge-patch+json", patch); code != 200 {
			t.Fatalf("update %s: %d %s", c.name, code, b)
		}
	}
	// failedOnLastGood waits for the failed update to show, then checks that
	// the status names revision 00001 as serving and that it does serve.
	failedOnLastGood := func(d *dev, c string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Minute)
		for {
			fn, raw := get(d, c)
			if fn.Status.ObservedGeneration == fn.Metadata.Generation && fn.Status.Phase == "Failed" {
				if fn.Status.LatestReadyRevision != c+"-00001" || fn.Status.URL == "" {
					t.Fatalf("%s: status after a failed update does not name the revision serving: %s", c, raw)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the failing update did not fail: %s", c, raw)
			}
			time.Sleep(100 * time.Millisecond)
		}
		answersGood(d, c)
	}
	for _, c := range cases {
		failedOnLastGood(d, c.name)
		if c.startFails {
			fn, raw := get(d, c.name)
			if st, reason, msg := serviceReady(fn); st != "False" || reason != "RevisionFailed" || !strings.Contains(msg, c.failure) {
				t.Fatalf("%s: ServiceReady does not tell the failed start: %s", c.name, raw)
			}
		}
	}

	d.stop()
	restarted := time.Now().Truncate(time.Second)
	d2 := startDevIn(t, data, time.Minute)
	for _, c := range cases {
		answersGood(d2, c.name)
		if !c.startFails {
			failedOnLastGood(d2, c.name)
			continue
		}
		// The restarted server tries the failing revision again: wait until
		// it reported that, then the status must still name 00001 serving.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			fn, raw := get(d2, c.name)
			st, reason, msg := serviceReady(fn)
			if st == "False" && reason == "RevisionFailed" && strings.Contains(msg, c.failure) && !transitionTime(raw).Before(restarted) {
				if fn.Status.LatestReadyRevision != c.name+"-00001" || fn.Status.Phase != "Failed" {
					t.Fatalf("%s after restart: %s", c.name, raw)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the restarted server did not report the failing revision again: %s", c.name, raw)
			}
			time.Sleep(100 * time.Millisecond)
		}
		answersGood(d2, c.name)
	}
}

// transitionTime is the lastTransitionTime of the ServiceReady condition of
// a Function's JSON.
func transitionTime(raw string) time.Time {
	var fn struct {
		Status struct {
			Conditions []struct {
				Type               string    `json:"type"`
				LastTransitionTime time.Time `json:"lastTransitionTime"`
			} `json:"conditions"`
		} `json:"status"`
	}
	_ = json.Unmarshal([]byte(raw), &fn)
	for _, c := range fn.Status.Conditions {
		if c.Type == "ServiceReady" {
			return c.LastTransitionTime
		}
	}
	return time.Time{}
}
