package invoke_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/adapter/postgres/postgrestest"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/test/testbed"
)

func TestCursorRoundTripAndRejects(t *testing.T) {
	c := invoke.Cursor{StartedAt: time.Date(2026, 5, 1, 1, 2, 3, 456789000, time.UTC), ID: 42, RequestID: "req-7f3a"}
	got, err := invoke.ParseCursor(c.String())
	if err != nil || !got.StartedAt.Equal(c.StartedAt) || got.ID != 42 || got.RequestID != "req-7f3a" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	// Version 1, from before request ids: start time and ID only.
	v1 := make([]byte, 17)
	v1[0] = 1
	binary.BigEndian.PutUint64(v1[1:9], uint64(c.StartedAt.UnixMicro()))
	binary.BigEndian.PutUint64(v1[9:], 42)
	if got, err := invoke.ParseCursor(base64.RawURLEncoding.EncodeToString(v1)); err != nil || got.ID != 42 || got.RequestID != "" || !got.StartedAt.Equal(c.StartedAt) {
		t.Errorf("version 1 cursor: %+v, %v", got, err)
	}
	token := func(version byte, requestID string) string {
		b := append([]byte{version}, make([]byte, 16)...)
		return base64.RawURLEncoding.EncodeToString(append(b, requestID...))
	}
	for _, bad := range []string{"", "x", "AAAA", c.String() + "A", "!!!!!!!!!!!!!!!!!!!!!!!",
		token(1, "req"), // version 1 had no request id
		token(3, ""),    // a version not made here
		token(2, strings.Repeat("r", invoke.MaxRequestIDLength+1)), // longer than a request id
		token(2, "\xff\xfe"), // not UTF-8
	} {
		if _, err := invoke.ParseCursor(bad); err == nil {
			t.Errorf("ParseCursor(%q) accepted", bad)
		}
	}
}

func listServer(t *testing.T, h invoke.History) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/v1/namespaces/{namespace}/functions/{name}/invocations", invoke.ListHandler{History: h})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestListHandlerRefusesBadInput(t *testing.T) {
	base := listServer(t, postgrestest.New(t))
	cases := []struct {
		query  string
		status int
		fields []string
	}{
		{"status=2xy", 400, []string{"status"}},
		{"status=600", 400, []string{"status"}},
		{"status=20", 400, []string{"status"}},
		{"status=6xx", 400, []string{"status"}},
		{"status=504", 200, nil},
		{"trigger=webhook", 400, []string{"trigger"}},
		{"trigger=service", 400, []string{"trigger"}}, // a SlessService's, listed at …/services/
		{"since=yesterday", 400, []string{"since"}},
		{"until=2026-13-01T00:00:00Z", 400, []string{"until"}},
		{"since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z", 400, []string{"until"}},
		{"limit=0", 400, []string{"limit"}},
		{"limit=1001", 400, []string{"limit"}},
		{"limit=ten", 400, []string{"limit"}},
		{"cursor=not-a-cursor", 400, []string{"cursor"}},
		{"limit=1&limit=2", 400, []string{"limit"}},
		{"status=9xx&trigger=x&limit=-1", 400, []string{"status", "trigger", "limit"}},
		{"status=5XX&trigger=cron&since=2026-01-01T00:00:00Z&until=2026-01-02T00:00:00.5%2B01:00&limit=1000", 200, nil},
		// Parameters it does not take, as every REST API route refuses them:
		// a misspelt filter would otherwise list everything.
		{"stauts=5xx", 400, []string{"stauts"}},
		{"trigger=cron&dryRun=All&fieldSelector=x", 400, []string{"dryRun", "fieldSelector"}},
		{"status=5xx&cursor=%zz", 400, []string{"query"}},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			resp, err := http.Get(base + "/v1/namespaces/ns/functions/fn/invocations?" + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.status != 400 {
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("Content-Type %q", ct)
			}
			var p invoke.Problem
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			// Shaped as every REST API problem is (docs/api.md).
			if p.Type != "https://sless.dev/problems/invalid" || p.Instance != "/v1/namespaces/ns/functions/fn/invocations" || p.Reason != invoke.ReasonInvalid {
				t.Errorf("type %q, instance %q, reason %q", p.Type, p.Instance, p.Reason)
			}
			var got []string
			for _, e := range p.Errors {
				got = append(got, e.Field)
				if e.Detail == "" || (e.Type != "FieldValueInvalid" && e.Type != "FieldValueDuplicate" && e.Type != "FieldValueNotSupported") {
					t.Errorf("field %s: detail %q, type %q", e.Field, e.Detail, e.Type)
				}
			}
			if len(got) != len(tc.fields) {
				t.Fatalf("fields %v, want %v", got, tc.fields)
			}
			for i := range got {
				if got[i] != tc.fields[i] {
					t.Fatalf("fields %v, want %v", got, tc.fields)
				}
			}
		})
	}
	for _, path := range []string{"/v1/namespaces/NS/functions/fn/invocations", "/v1/namespaces/ns/functions/9fn/invocations"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", path, resp.StatusCode)
		}
	}
	resp, err := http.Post(base+"/v1/namespaces/ns/functions/fn/invocations", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") == "" {
		t.Errorf("POST: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestListHandlerPagesThroughHistory(t *testing.T) {
	s := postgrestest.New(t)
	base := listServer(t, s)
	start := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	var records []invoke.Record
	for i := range 25 {
		status := 200
		if i%5 == 0 {
			status = 502
		}
		records = append(records, invoke.Record{Namespace: "ns", Function: "fn", Trigger: invoke.TriggerHTTP,
			RequestID: strconv.Itoa(i), StartedAt: start.Add(time.Duration(i) * time.Second), Duration: 1500 * time.Microsecond, Status: status})
	}
	if err := s.Write(context.Background(), invoke.Batch{ID: "b", Records: records}); err != nil {
		t.Fatal(err)
	}
	get := func(q url.Values) invoke.InvocationList {
		t.Helper()
		resp, err := http.Get(base + "/v1/namespaces/ns/functions/fn/invocations?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var l invoke.InvocationList
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	var ids []string
	q := url.Values{"limit": {"10"}}
	for pages := 0; ; pages++ {
		l := get(q)
		for _, it := range l.Items {
			ids = append(ids, it.RequestID)
		}
		if l.Next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("no end")
		}
		q.Set("cursor", l.Next)
	}
	if len(ids) != 25 || ids[0] != "24" || ids[24] != "0" {
		t.Fatalf("listed %v", ids)
	}
	l := get(url.Values{"status": {"5xx"}})
	if len(l.Items) != 5 || l.Next != "" || l.Items[0].Status != 502 || l.Items[0].DurationMs != 1.5 || l.Items[0].StartedAt != start.Add(20*time.Second) {
		t.Fatalf("5xx list %+v", l)
	}
	if l := get(url.Values{"status": {"502"}}); len(l.Items) != 5 || l.Items[0].Status != 502 {
		t.Fatalf("status=502 list %+v", l)
	}
	if l := get(url.Values{"status": {"500"}}); len(l.Items) != 0 {
		t.Fatalf("status=500 list %+v", l)
	}
	// An empty listing is an empty array, not null.
	resp, err := http.Get(base + "/v1/namespaces/ns/functions/other/invocations")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != `{"items":[]}` {
		t.Fatalf("empty list %s", b)
	}
}

// With Functions set, an empty first page of a function that does not
// exist is a 404; a function never called lists empty, and a deleted one's
// records stay listable.
func TestListHandlerMissingFunction(t *testing.T) {
	s := postgrestest.New(t)
	ts := &targets{}
	ts.set("ns", "quiet", invoke.Target{})
	mux := http.NewServeMux()
	mux.Handle("/v1/namespaces/{namespace}/functions/{name}/invocations", invoke.ListHandler{History: s, Functions: ts})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	rec := invoke.Record{Namespace: "ns", Function: "deleted", Trigger: invoke.TriggerHTTP, RequestID: "r1", StartedAt: time.Now().UTC(), Status: 200}
	if err := s.Write(context.Background(), invoke.Batch{ID: "m", Records: []invoke.Record{rec}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, query string
		status      int
	}{
		{"quiet", "", 200},
		{"quiet", "status=5xx", 200},
		{"deleted", "", 200},
		{"nothing", "", 404},
		{"nothing", "status=5xx", 404},
	} {
		resp, err := http.Get(srv.URL + "/v1/namespaces/ns/functions/" + tc.name + "/invocations?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s?%s: %d, want %d: %s", tc.name, tc.query, resp.StatusCode, tc.status, b)
		}
		var p invoke.Problem
		if tc.status == 404 && (json.Unmarshal(b, &p) != nil || p.Reason != invoke.ReasonNotFound || !strings.Contains(p.Detail, `no function "ns/nothing"`)) {
			t.Errorf("%s?%s: want a FunctionNotFound problem: %s", tc.name, tc.query, b)
		}
	}
}

// While the history store is down, no problem body of a route that reads
// or writes records names the database's user, database, host or port: it
// says "history store unavailable" with reason Unavailable and Retry-After,
// and the full error goes to the server's log.
func TestStoreDownProblemsNameNoDatabase(t *testing.T) {
	// A store that never answered: nothing listens on its port.
	port, err := testbed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	never := fmt.Sprintf("postgres://leaky_user:leaky_password@localhost:%d/leaky_db?sslmode=disable&connect_timeout=2", port)
	// A store that answered and then crashed.
	srv, err := testbed.StartPostgres()
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	t.Cleanup(srv.Remove)
	crashed := testbed.CreateDatabase(t, srv.URL("postgres"))
	crashedStore, err := postgres.Open(crashed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(crashedStore.Close)
	if err := crashedStore.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Crash(); err != nil {
		t.Fatal(err)
	}

	for _, db := range []struct {
		name string
		url  string
	}{{"never up", never}, {"crashed", crashed}} {
		u, err := url.Parse(db.url)
		if err != nil {
			t.Fatal(err)
		}
		secrets := []string{u.User.Username(), strings.TrimPrefix(u.Path, "/"), u.Hostname(), u.Port(), u.Host}
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw)
		}
		store, err := postgres.Open(db.url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(store.Close)
		var logs testbed.SyncBuffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		rec := invoke.NewRecorder(store, invoke.RecorderOptions{Logger: log, MinBackoff: time.Second, WriteTimeout: time.Second})
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_ = rec.Close(ctx)
		})
		ts := &targets{}
		ts.set("ns", "fn", invoke.Target{Address: echo(t, nil), Ready: true, Public: true})
		proxy, err := invoke.NewProxy(invoke.Options{Resolver: ts, Recorder: rec, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/v1/namespaces/{namespace}/functions/{name}/invocations", invoke.ListHandler{History: store, Logger: log})
		mux.Handle("/fn/", proxy)
		front := httptest.NewServer(mux)
		t.Cleanup(front.Close)

		list := "/v1/namespaces/ns/functions/fn/invocations"
		cursor := invoke.Cursor{StartedAt: time.Now(), ID: 9}.String()
		for _, c := range []struct {
			name, method, path string
			status             int
		}{
			{"list", "GET", list, 503},
			{"list head", "HEAD", list, 503},
			{"list filtered", "GET", list + "?status=5xx&trigger=cron&limit=3", 503},
			{"list window", "GET", list + "?since=2026-01-01T00:00:00Z&until=2026-02-01T00:00:00Z", 503},
			{"list next page", "GET", list + "?cursor=" + cursor, 503},
			{"list unknown function", "GET", "/v1/namespaces/ns/functions/nobody/invocations", 503},
			{"invoke, recorded", "GET", "/fn/ns/fn", 201},
			{"invoke with a body, recorded", "POST", "/fn/ns/fn/path", 201},
			{"invoke of a missing function, recorded", "GET", "/fn/ns/missing", 401},
		} {
			t.Run(db.name+"/"+c.name, func(t *testing.T) {
				req, _ := http.NewRequest(c.method, front.URL+c.path, strings.NewReader("payload"))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.status {
					t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
				}
				for _, s := range secrets {
					if s != "" && strings.Contains(string(body), s) {
						t.Fatalf("body names %q: %s", s, body)
					}
				}
				if c.status != 503 {
					return
				}
				if resp.Header.Get("Retry-After") == "" {
					t.Fatal("no Retry-After")
				}
				if c.method == "HEAD" {
					return
				}
				var p invoke.Problem
				if err := json.Unmarshal(body, &p); err != nil || p.Detail != invoke.HistoryUnavailable || p.Reason != invoke.ReasonUnavailable {
					t.Fatalf("problem %s (%v); want detail %q, reason %s", body, err, invoke.HistoryUnavailable, invoke.ReasonUnavailable)
				}
			})
		}
		// The server's log has the error in full.
		if !strings.Contains(logs.String(), u.Port()) {
			t.Errorf("%s: the log lacks the store's error:\n%s", db.name, logs.String())
		}
	}
}
