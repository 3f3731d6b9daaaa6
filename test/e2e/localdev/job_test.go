package localdev_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A FunctionJob created through the REST API runs in process, its output
// lands in its status, a new runID runs it again, and each run is listed as
// a job invocation.
func TestJobThroughAPI(t *testing.T) {
	d := startDev(t, time.Minute)
	fn, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": "worker"},
		"spec": map[string]any{"runtime": "nodejs22", "entrypoint": "index.handler",
			"source": map[string]any{"inline": map[string]any{"files": map[string]string{
				"index.js": "exports.handler = async (event) => ({sum: event.body.a + event.body.b});\n"}}}},
	})
	if code, b := d.do("POST", "/v1/namespaces/e2e/functions", "application/json", fn); code != 201 {
		t.Fatalf("create function: %d %s", code, b)
	}
	d.awaitReady("e2e", "worker", 3*time.Minute)

	job, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": "add"},
		"spec":     map[string]any{"function": "worker", "runID": 1, "payload": map[string]int{"a": 2, "b": 3}},
	})
	if code, b := d.do("POST", "/v1/namespaces/e2e/jobs", "application/json", job); code != 201 {
		t.Fatalf("create job: %d %s", code, b)
	}
	type jobStatus struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Status struct {
			Phase    string `json:"phase"`
			RunID    int64  `json:"runID"`
			Output   string `json:"output"`
			ExitCode *int   `json:"exitCode"`
		} `json:"status"`
	}
	await := func(runID int64) jobStatus {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, b := d.do("GET", "/v1/namespaces/e2e/jobs/add", "", nil)
			var j jobStatus
			if code != 200 || json.Unmarshal(b, &j) != nil {
				t.Fatalf("get job: %d %s", code, b)
			}
			if j.Status.RunID == runID && (j.Status.Phase == "Succeeded" || j.Status.Phase == "Failed") {
				return j
			}
			if time.Now().After(deadline) {
				t.Fatalf("job run %d not finished: %s", runID, b)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	j := await(1)
	if j.Status.Phase != "Succeeded" || !strings.Contains(strings.ReplaceAll(j.Status.Output, " ", ""), `"sum":5`) || j.Status.ExitCode == nil || *j.Status.ExitCode != 0 {
		t.Fatalf("run 1: %+v", j.Status)
	}
	patch := []byte(`{"spec":{"runID":2,"payload":{"a":40,"b":2}}}`)
	if code, b := d.do("PATCH", "/v1/namespaces/e2e/jobs/add", "application/merge-patch+json", patch); code != 200 {
		t.Fatalf("patch job: %d %s", code, b)
	}
	if j := await(2); j.Status.Phase != "Succeeded" || !strings.Contains(strings.ReplaceAll(j.Status.Output, " ", ""), `"sum":42`) {
		t.Fatalf("run 2: %+v", j.Status)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, b := d.do("GET", "/v1/namespaces/e2e/functions/worker/invocations?trigger=job", "", nil)
		var page struct {
			Items []struct {
				Trigger string `json:"trigger"`
				Status  int    `json:"status"`
			} `json:"items"`
		}
		if code != 200 || json.Unmarshal(b, &page) != nil {
			t.Fatalf("invocations: %d %s", code, b)
		}
		if len(page.Items) == 2 && page.Items[0].Trigger == "job" && page.Items[0].Status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job invocations: %s", b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
