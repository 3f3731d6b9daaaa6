package printers

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/invoke/wire"
	"github.com/sless-dev/sless/pkg/secrets"
)

// fields is a table's rows split into their columns.
func fields(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

func TestFunctionsAndDocs(t *testing.T) {
	var out bytes.Buffer
	if err := Functions(&out, "", "team", nil); err != nil || out.String() != "No functions in namespace team.\n" {
		t.Fatalf("none: %q %v", out.String(), err)
	}
	fns := []slessv1alpha1.Function{{ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec:   slessv1alpha1.FunctionSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: "python3.12"}},
		Status: slessv1alpha1.FunctionStatus{Phase: slessv1alpha1.FunctionPhaseBuilding}}}
	out.Reset()
	if err := Functions(&out, "table", "team", fns); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"NAME", "RUNTIME", "PHASE", "READY", "URL", "AGE"}, {"hello", "python3.12", "Building", "Unknown", "<none>", "<unknown>"}}
	if got := fields(out.String()); len(got) != 2 || strings.Join(got[0], " ") != strings.Join(want[0], " ") || strings.Join(got[1], " ") != strings.Join(want[1], " ") {
		t.Errorf("table:\n%s", out.String())
	}
	out.Reset()
	if err := Functions(&out, "yaml", "team", nil); err != nil || out.String() != "items: []\n" {
		t.Errorf("yaml of none: %q %v", out.String(), err)
	}
	out.Reset()
	if err := Functions(&out, "json", "team", fns); err != nil || !strings.Contains(out.String(), `"runtime": "python3.12"`) {
		t.Errorf("json: %q %v", out.String(), err)
	}
}

func TestFunctionDescribe(t *testing.T) {
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team"},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: "python3.12", Entrypoint: "main.handler",
				Source: slessv1alpha1.FunctionSource{Archive: &slessv1alpha1.ArchiveSource{SHA256: strings.Repeat("ab", 32)}},
				Env:    []slessv1alpha1.EnvVar{{Name: "A"}, {Name: "B"}}},
			Scale: &slessv1alpha1.ScaleSpec{Min: ptr.To[int32](1), Max: ptr.To[int32](3)}},
		Status: slessv1alpha1.FunctionStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: "False", Reason: "BuildFailed",
			Message: "step exited\n  with code 1", LastTransitionTime: metav1.NewTime(time.Now().Add(-2 * time.Minute))}}}}
	var out bytes.Buffer
	if err := Function(&out, fn); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Name:         hello\n", "Source:       archive sha256:abababababab\n", "Memory:       128 MiB\n",
		"Scale:        min 1, max 3\n", "Env:          A, B\n", "Phase:        Pending\n", "URL:          <none>\n",
		"\nConditions:\n", "BuildFailed   2m    step exited with code 1\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
}

func TestLastInvocations(t *testing.T) {
	page := &client.List[client.Invocation]{Items: []client.Invocation{{RequestID: "r1", Status: 200, Trigger: "http", DurationMs: 1.5, BytesIn: 2048,
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)}}}
	for _, tc := range []struct {
		name string
		page *client.List[client.Invocation]
		err  error
		want string
	}{
		{"records", page, nil, "  2026-01-02 03:04:05   200      1.5ms      http      <none>            2.0 KiB   0 B   r1"},
		{"none", &client.List[client.Invocation]{}, nil, "  <none>\n"},
		{"no history", nil, &client.Error{Status: http.StatusNotImplemented}, "<this server keeps no invocation history>"},
	} {
		var out bytes.Buffer
		if err := LastInvocations(&out, tc.page, tc.err); err != nil || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: %v\n%s\nwant %q", tc.name, err, out.String(), tc.want)
		}
	}
	boom := errors.New("boom")
	if err := LastInvocations(&bytes.Buffer{}, nil, boom); !errors.Is(err, boom) {
		t.Errorf("a listing's error: %v", err)
	}
}

func TestRevisionsAndTraffic(t *testing.T) {
	var out bytes.Buffer
	revs := []client.Revision{
		{Name: "f-00002", Percent: 90, Latest: true, Ready: true, SourceDigest: "sha256:" + strings.Repeat("0123456789", 6), Image: "r/f@sha256:1"},
		{Name: "f-00001", Percent: 10, Ready: false, Reason: "Crash", Tags: []client.RevisionTag{{Tag: "old", URL: "http://old"}}},
	}
	if err := Revisions(&out, "", "function", "f", revs); err != nil {
		t.Fatal(err)
	}
	rows := fields(out.String())
	if len(rows) != 3 || strings.Join(rows[1], " ") != "f-00002 90% (latest) <none> True sha256:012345678901 r/f@sha256:1 <unknown>" ||
		strings.Join(rows[2], " ") != "f-00001 10% old http://old False (Crash) <none> <none> <unknown>" {
		t.Errorf("table:\n%s", out.String())
	}
	out.Reset()
	if err := Revisions(&out, "", "service", "s", nil); err != nil || out.String() != "service s has no revision yet.\n" {
		t.Errorf("none: %q %v", out.String(), err)
	}
	out.Reset()
	Traffic(&out, "function", "f", []slessv1alpha1.TrafficTarget{{RevisionName: "f-00002", Percent: ptr.To[int64](90)},
		{RevisionName: "f-00001", Percent: ptr.To[int64](10), Tag: "old"}})
	if out.String() != "function f: 90% f-00002, 10% f-00001 (old)\n" {
		t.Errorf("traffic: %q", out.String())
	}
}

func TestSecrets(t *testing.T) {
	in := secrets.Info{Keys: []string{"b", "a"}}
	in.Metadata.Name, in.Metadata.Namespace, in.Metadata.ResourceVersion = "db", "team", "7"
	var out bytes.Buffer
	if err := Secret(&out, "", &in); err != nil || !strings.Contains(out.String(), "Keys:        a, b\n") || !strings.Contains(out.String(), "Version:     7\n") {
		t.Errorf("describe: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := Secrets(&out, "", "team", []secrets.Info{in}); err != nil || strings.Join(fields(out.String())[1][:3], " ") != "db b,a 7" {
		t.Errorf("table: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := Secrets(&out, "json", "team", nil); err != nil || !strings.Contains(out.String(), `"items": []`) {
		t.Errorf("json of none: %q %v", out.String(), err)
	}
}

func TestAnswers(t *testing.T) {
	a := &client.Answer{Status: 503, Header: http.Header{client.ErrorHeader: {"NoCapacity"}},
		Body: []byte(`{"title":"no capacity","detail":"all 3 instances busy"}`)}
	if got, want := Problem(a), "503 Service Unavailable: no capacity: all 3 instances busy (NoCapacity)"; got != want {
		t.Errorf("Problem = %q, want %q", got, want)
	}
	var out bytes.Buffer
	Head(&out, 200, http.Header{"B": {"2"}, "A": {"1"}})
	Body(&out, []byte("hi"))
	Body(&out, []byte("there\n"))
	if out.String() != "HTTP 200 OK\nA: 1\nB: 2\n\nhi\nthere\n" {
		t.Errorf("head and bodies: %q", out.String())
	}
	out.Reset()
	body := "done"
	rec := &client.AsyncInvocation{}
	AsyncAnswer(&out, rec, true)
	rec.Response = &client.AsyncResponse{Status: 201, Headers: map[string]string{"X": "y"}, Body: &body}
	AsyncAnswer(&out, rec, true)
	if out.String() != "HTTP 201 Created\nX: y\n\ndone\n" {
		t.Errorf("async answer: %q", out.String())
	}
}

func TestAsyncInvocations(t *testing.T) {
	var out bytes.Buffer
	if err := AsyncInvocations(&out, "", "team", "f", nil); err != nil || out.String() != "No asynchronous calls of team/f match.\n" {
		t.Fatalf("none: %q %v", out.String(), err)
	}
	items := []client.AsyncInvocation{
		{RequestID: "r2", State: "dead-lettered", Attempts: 3, LastError: "503\nagain", AcceptedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)},
		{RequestID: "r1", State: "succeeded", Attempts: 1, Response: &client.AsyncResponse{Status: 200},
			Callback: &wire.Callback{State: wire.CallbackFailed, LastError: "refused"}, AcceptedAt: time.Date(2026, 1, 2, 3, 4, 0, 0, time.Local)},
	}
	out.Reset()
	if err := AsyncInvocations(&out, "", "team", "f", items); err != nil {
		t.Fatal(err)
	}
	rows := fields(out.String())
	if len(rows) != 3 || strings.Join(rows[1], " ") != "2026-01-02 03:04:05 dead-lettered 3 - - r2 503 again" ||
		strings.Join(rows[2], " ") != "2026-01-02 03:04:00 succeeded 1 200 failed r1 callback: refused" {
		t.Errorf("table:\n%s", out.String())
	}
}

func TestServices(t *testing.T) {
	var out bytes.Buffer
	if err := Services(&out, "", "team", nil); err != nil || out.String() != "No services in namespace team.\n" {
		t.Fatalf("empty: %q %v", out.String(), err)
	}
	svcs := []slessv1alpha1.SlessService{{
		ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
		Spec:       slessv1alpha1.SlessServiceSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: "nodejs22"}},
		Status: slessv1alpha1.FunctionStatus{Phase: slessv1alpha1.FunctionPhaseReady, URL: "https://s.example/svc/team/web/",
			Conditions: []metav1.Condition{{Type: "Ready", Status: "True"}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "idle", CreationTimestamp: metav1.NewTime(time.Now())},
		Spec:       slessv1alpha1.SlessServiceSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: "python3.12"}, MinScale: ptr.To[int32](0)},
	}}
	out.Reset()
	if err := Services(&out, "", "team", svcs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", out.String())
	}
	for i, want := range [][]string{
		{"NAME", "RUNTIME", "PHASE", "READY", "MIN", "URL", "AGE"},
		{"web", "nodejs22", "Ready", "True", "1", "https://s.example/svc/team/web/", "60m"},
		{"idle", "python3.12", "Pending", "Unknown", "0"},
	} {
		f := strings.Fields(lines[i])
		for j, w := range want {
			if j >= len(f) || f[j] != w {
				t.Errorf("line %d: %q, want fields %v", i, lines[i], want)
				break
			}
		}
	}
	out.Reset()
	if err := Services(&out, "json", "team", nil); err != nil || !strings.Contains(out.String(), `"items": []`) {
		t.Errorf("json of none: %q %v", out.String(), err)
	}
}
