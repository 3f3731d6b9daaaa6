package sless

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func TestParseTraceparent(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tc := range []struct {
		in      string
		ok      bool
		sampled bool
	}{
		{"00-" + tid + "-" + sid + "-01", true, true},
		{"00-" + tid + "-" + sid + "-00", true, false},
		{" 00-" + tid + "-" + sid + "-03 ", true, true},
		{"01-" + tid + "-" + sid + "-01-future", true, true}, // a later version may add fields
		{"", false, false},
		{"garbage", false, false},
		{"00-" + tid + "-" + sid + "-01-extra", false, false}, // version 00 has nothing after the flags
		{"ff-" + tid + "-" + sid + "-01", false, false},
		{"00-" + "00000000000000000000000000000000" + "-" + sid + "-01", false, false},
		{"00-" + tid + "-0000000000000000-01", false, false},
		{"00-" + "4BF92F3577B34DA6A3CE929D0E0E4736" + "-" + sid + "-01", false, false}, // upper case
		{"00-" + tid[:31] + "-" + sid + "-01", false, false},
		{"00-" + tid + "-" + sid + "-0g", false, false},
		{"00_" + tid + "_" + sid + "_01", false, false},
		{"01-" + tid + "-" + sid + "-01x", false, false},
	} {
		gotTID, gotSID, sampled, ok := parseTraceparent(tc.in)
		if ok != tc.ok || sampled != tc.sampled || (ok && (gotTID != tid || gotSID != sid)) {
			t.Errorf("parseTraceparent(%q) = %q %q %v %v, want ok %v sampled %v", tc.in, gotTID, gotSID, sampled, ok, tc.ok, tc.sampled)
		}
	}
}

func TestTracesEndpoint(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{nil, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}, "http://c:4318/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x"}, "http://t/x"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "otlp"}, "http://c:4318/v1/traces"},
	} {
		if got := tracesEndpoint(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.env, got, tc.want)
		}
	}
}

// Bad settings turn tracing off rather than fail the function.
func TestTracerFromEnvRefusals(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://c"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
	} {
		if tr := tracerFromEnv(func(k string) string { return env[k] }, config{}); tr != nil {
			tr.shutdown(time.Second)
			t.Errorf("%v: tracing is on", env)
		}
	}
}

func TestEnvList(t *testing.T) {
	got := envList(" a=1 , b = two%20words ,bad, =x, c=%zz,d=x=y")
	want := map[string]string{"a": "1", "b": "two words", "c": "%zz", "d": "x=y"}
	if len(got) != len(want) {
		t.Errorf("envList: %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("envList[%q] = %q, want %q", k, got[k], v)
		}
	}
}

// Spans ended from many goroutines at once all arrive, in batches no larger
// than the batch size, and shutdown sends the last of them (run with -race).
func TestTracerConcurrentSpans(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	largest := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var doc struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []otlpSpan `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Errorf("not OTLP/JSON: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range doc.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				largest = max(largest, len(ss.Spans))
				for _, s := range ss.Spans {
					seen[s.SpanID] = true
				}
			}
		}
	}))
	defer srv.Close()
	tr := newTracer(srv.URL+"/v1/traces", nil, map[string]string{"service.name": "t"}, time.Hour, 5*time.Second)
	tr.maxBatch = 64
	var wg sync.WaitGroup
	ids := make(chan string, 1000)
	for g := 0; g < 10; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				sp, _ := tr.start("f", "", "")
				sp.set("i", i)
				endSpan(sp, 200)
				ids <- sp.spanID
			}
		}()
	}
	wg.Wait()
	close(ids)
	tr.shutdown(10 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	for id := range ids {
		if !seen[id] {
			t.Fatalf("span %s never arrived (%d of 1000 did)", id, len(seen))
		}
	}
	if largest > 64 {
		t.Errorf("a batch of %d spans, past the batch size 64", largest)
	}
}
