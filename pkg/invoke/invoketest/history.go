package invoketest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
)

// Store is a History that records can be written to: PostgreSQL's and
// local mode's.
type Store interface {
	invoke.Sink
	invoke.History
}

// KindsApart fails t unless s keeps a Function's records and those of the
// SlessService of the same name apart: both are kept under the name, told
// apart by trigger service (invoke.Query.Service).
func KindsApart(t testing.TB, s Store) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var records []invoke.Record
	for i, trig := range []string{invoke.TriggerHTTP, invoke.TriggerService, invoke.TriggerCron, invoke.TriggerService} {
		records = append(records, invoke.Record{Namespace: "ns", Function: "web", Trigger: trig, RequestID: fmt.Sprint(i),
			StartedAt: at.Add(time.Duration(i) * time.Second), Status: 200})
	}
	if err := s.Write(ctx, invoke.Batch{ID: "kinds-apart", Records: records}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    invoke.Query
		want string
	}{
		{invoke.Query{}, "2 0"},
		{invoke.Query{Service: true}, "3 1"},
		{invoke.Query{Trigger: invoke.TriggerService}, ""},
		{invoke.Query{Trigger: invoke.TriggerHTTP, Service: true}, ""},
	} {
		q := tc.q
		q.Namespace, q.Function, q.Limit = "ns", "web", 10
		page, err := s.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range page.Items {
			ids = append(ids, r.RequestID)
		}
		if got := strings.Join(ids, " "); got != tc.want {
			t.Errorf("%+v lists %q, want %q", tc.q, got, tc.want)
		}
	}
}
