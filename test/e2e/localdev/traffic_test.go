package localdev_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Traffic through a real sless dev: two revisions split 50/50 both serve,
// each tag reaches its own revision, the records name the revision of
// each call, a rollback moves every next call to the old revision with no
// call failing on the way, and a bad traffic block is refused.
func TestTrafficSplitTagsAndRollback(t *testing.T) {
	d := startDev(t, time.Minute)
	const ns, name = "e2e", "split"
	item := "/v1/namespaces/" + ns + "/functions/" + name
	code := func(v string) map[string]any {
		return map[string]any{"inline": map[string]any{"files": map[string]string{
			"main.py": "def handler(event, context):\n    return {'version': '" + v + "'}\n"}}}
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": name},
		"spec": map[string]any{"runtime": "python3.12", "entrypoint": "main.handler", "source": code("v1")}})
	if c, b := d.do("POST", "/v1/namespaces/"+ns+"/functions", "application/json", body); c != 201 {
		t.Fatalf("create: %d %s", c, b)
	}
	d.awaitReady(ns, name, 5*time.Minute)

	// The bad traffic blocks are refused before anything changes.
	for _, bad := range []struct{ traffic, want string }{
		{`[{"revisionName":"split-00001","percent":40},{"latestRevision":true,"percent":50}]`, "traffic targets sum to 90, want 100"},
		{`[{"percent":50},{"percent":50,"tag":"b"}]`, "at most one traffic target may follow the latest revision"},
		{`[{"revisionName":"other-00001","percent":100}]`, "revisionName must name a revision of this function"},
		{`[{"percent":100,"tag":"Canary"}]`, "DNS-1035 label"},
		{`[{"latestRevision":false,"percent":100}]`, "latestRevision: false needs one"},
	} {
		c, b := d.do("PATCH", item, "application/merge-patch+json", []byte(`{"spec":{"traffic":`+bad.traffic+`}}`))
		if c != 400 || !strings.Contains(string(b), bad.want) {
			t.Errorf("traffic %s: %d %s; want 400 saying %q", bad.traffic, c, b, bad.want)
		}
	}

	// New code, the old revision kept at half the calls.
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"source": code("v2"), "traffic": []map[string]any{
		{"revisionName": name + "-00001", "percent": 50, "tag": "old"},
		{"latestRevision": true, "percent": 50, "tag": "new"},
	}}})
	if c, b := d.do("PATCH", item, "application/merge-patch+json", patch); c != 200 {
		t.Fatalf("split: %d %s", c, b)
	}
	fn := d.awaitReady(ns, name, 5*time.Minute)
	if fn.Status.LatestReadyRevision != name+"-00002" {
		t.Fatalf("latestReadyRevision %q", fn.Status.LatestReadyRevision)
	}
	call := func(path string) (string, error) {
		c, b := d.do("GET", path, "", nil)
		var a answer
		if c != 200 || json.Unmarshal(b, &a) != nil {
			return "", fmt.Errorf("%s: %d %s", path, c, b)
		}
		return a.Version, nil
	}
	counts := map[string]int{}
	for range 200 {
		v, err := call("/fn/" + ns + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		counts[v]++
	}
	t.Logf("200 calls split 50/50: %v", counts)
	for _, v := range []string{"v1", "v2"} {
		if counts[v] < 70 || counts[v] > 130 {
			t.Errorf("%s served %d of 200 calls, want 70 to 130 (35%%–65%%)", v, counts[v])
		}
	}
	for tag, want := range map[string]string{"old": "v1", "new": "v2"} {
		for range 5 {
			if v, err := call("/fn/" + ns + "/" + name + "@" + tag); err != nil || v != want {
				t.Fatalf("@%s answered %q, %v; want %s", tag, v, err, want)
			}
		}
	}
	if c, b := d.do("GET", "/fn/"+ns+"/"+name+"@nope", "", nil); c != 404 {
		t.Errorf("an unknown tag: %d %s", c, b)
	}

	// The revisions, with their shares and tags' URLs.
	c, b := d.do("GET", item+"/revisions", "", nil)
	var revs struct {
		Items []struct {
			Name    string `json:"name"`
			Ready   bool   `json:"ready"`
			Percent int64  `json:"percent"`
			Image   string `json:"image"`
			Tags    []struct{ Tag, URL string }
		} `json:"items"`
	}
	if c != 200 || json.Unmarshal(b, &revs) != nil || len(revs.Items) != 2 {
		t.Fatalf("revisions: %d %s", c, b)
	}
	for i, want := range []struct{ name, tag, version string }{{name + "-00002", "new", "v2"}, {name + "-00001", "old", "v1"}} {
		r := revs.Items[i]
		if r.Name != want.name || !r.Ready || r.Percent != 50 || len(r.Tags) != 1 || r.Tags[0].Tag != want.tag ||
			!strings.HasPrefix(r.Tags[0].URL, "http://"+want.tag+"-"+name+"."+ns+".") {
			t.Fatalf("revision %d: %+v, want %s at 50%% with tag %s at its own host", i, r, want.name, want.tag)
		}
		// The tag's own host reaches its revision: *.localhost is loopback,
		// which this machine's resolver may not say, so the host is sent
		// to sless dev's address.
		u, err := url.Parse(r.Tags[0].URL)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", d.base, nil)
		req.Host = u.Host
		req.Header.Set("Authorization", "Bearer "+d.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", r.Tags[0].URL, err)
		}
		var a answer
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if resp.StatusCode != 200 || err != nil || a.Version != want.version {
			t.Fatalf("%s: %d %+v %v, want %s", r.Tags[0].URL, resp.StatusCode, a, err, want.version)
		}
	}

	// The records tell which revision served each call.
	served := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		clear(served)
		c, b := d.do("GET", item+"/invocations?limit=1000", "", nil)
		var list struct {
			Items []struct {
				Revision string `json:"revision"`
			} `json:"items"`
		}
		if c != 200 || json.Unmarshal(b, &list) != nil {
			t.Fatalf("invocations: %d %s", c, b)
		}
		for _, r := range list.Items {
			served[r.Revision]++
		}
		if served[name+"-00001"]+served[name+"-00002"] >= 212 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if served[name+"-00001"] != counts["v1"]+6 || served[name+"-00002"] != counts["v2"]+6 {
		t.Errorf("records name revisions %v, the calls were answered %v (and 6 of each by tag)", served, counts)
	}

	// Roll back while calls go on: none fails, and every call after the
	// switch is the old revision's.
	var failed atomic.Int64
	var calls atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := call("/fn/" + ns + "/" + name); err != nil {
					failed.Add(1)
					t.Errorf("a call during the rollback: %v", err)
				}
				calls.Add(1)
			}
		}()
	}
	rollback := []byte(`{"spec":{"traffic":[{"revisionName":"` + name + `-00001","percent":100}]}}`)
	if c, b := d.do("PATCH", item, "application/merge-patch+json", rollback); c != 200 {
		t.Fatalf("rollback: %d %s", c, b)
	}
	d.awaitReady(ns, name, time.Minute)
	close(stop)
	wg.Wait()
	t.Logf("%d calls during the rollback, %d failed", calls.Load(), failed.Load())
	for i := range 50 {
		if v, err := call("/fn/" + ns + "/" + name); err != nil || v != "v1" {
			t.Fatalf("call %d after the rollback: %q, %v; want v1", i, v, err)
		}
	}
}
