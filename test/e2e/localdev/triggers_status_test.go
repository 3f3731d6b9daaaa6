package localdev_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Triggers made through the REST API report what docs/triggers.md says: an
// http trigger is Public at the function's URL, and a trigger of a function
// that does not exist is paused with FunctionNotFound until it does.
func TestTriggerStatusThroughAPI(t *testing.T) {
	d := startDev(t, time.Minute)
	fn, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"runtime": "python3.12", "entrypoint": "main.handler",
			"source": map[string]any{"inline": map[string]any{"files": map[string]string{
				"main.py": "def handler(event, context):\n    return 'hi'\n"}}}},
	})
	if code, b := d.do("POST", "/v1/namespaces/e2e/functions", "application/json", fn); code != 201 {
		t.Fatalf("create function: %d %s", code, b)
	}
	d.awaitReady("e2e", "web", 3*time.Minute)

	for _, tc := range []struct {
		name, url, reason string
		spec              map[string]any
	}{
		{name: "public", url: "http://web.e2e.fn.localhost:" + d.base[strings.LastIndexByte(d.base, ':')+1:], reason: "Public",
			spec: map[string]any{"function": "web", "type": "http"}},
		{name: "ghost", reason: "FunctionNotFound",
			spec: map[string]any{"function": "ghost", "type": "cron", "schedule": "* * * * *"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": tc.name}, "spec": tc.spec})
			if code, b := d.do("POST", "/v1/namespaces/e2e/triggers", "application/json", body); code != 201 {
				t.Fatalf("create trigger: %d %s", code, b)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				code, b := d.do("GET", "/v1/namespaces/e2e/triggers/"+tc.name, "", nil)
				var tr struct {
					Status struct {
						URL        string                          `json:"url"`
						Conditions []struct{ Type, Reason string } `json:"conditions"`
					} `json:"status"`
				}
				if code != 200 || json.Unmarshal(b, &tr) != nil {
					t.Fatalf("get trigger: %d %s", code, b)
				}
				reason := ""
				for _, c := range tr.Status.Conditions {
					if c.Type == "Ready" {
						reason = c.Reason
					}
				}
				if reason == tc.reason && tr.Status.URL == tc.url {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("trigger %s: %s; want Ready reason %s, url %q", tc.name, b, tc.reason, tc.url)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
