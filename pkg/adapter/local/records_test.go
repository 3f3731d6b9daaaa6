package local

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
)

func TestRecordsWriteAndList(t *testing.T) {
	ctx := context.Background()
	st, _ := openTestStore(t)
	recs, err := st.Records()
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var batch []invoke.Record
	for i := 0; i < 25; i++ {
		status, trigger := 200, invoke.TriggerHTTP
		if i%5 == 0 {
			status = 500
		}
		if i%2 == 1 {
			trigger = invoke.TriggerCron
		}
		// Two records share each start time: the id breaks the tie.
		batch = append(batch, invoke.Record{Namespace: "ns", Function: "f", Trigger: trigger, Status: status,
			RequestID: fmt.Sprint(i), StartedAt: base.Add(time.Duration(i/2) * time.Second), Duration: time.Millisecond})
	}
	batch = append(batch, invoke.Record{Namespace: "ns", Function: "other", Status: 200, StartedAt: base, Trigger: invoke.TriggerHTTP})
	if err := recs.Write(ctx, invoke.Batch{ID: "b1", Records: batch}); err != nil {
		t.Fatal(err)
	}
	// The same batch again (a lost acknowledgement) stores nothing.
	if err := recs.Write(ctx, invoke.Batch{ID: "b1", Records: batch}); err != nil {
		t.Fatal(err)
	}
	var all []invoke.Record
	q := invoke.Query{Namespace: "ns", Function: "f", Limit: 7}
	for pages := 0; ; pages++ {
		page, err := recs.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Items...)
		if page.Next == nil {
			break
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		q.After = page.Next
	}
	if len(all) != 25 {
		t.Fatalf("listed %d records, want 25", len(all))
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if a.StartedAt.Before(b.StartedAt) || (a.StartedAt.Equal(b.StartedAt) && a.ID < b.ID) {
			t.Fatalf("not newest first at %d: %v/%d then %v/%d", i, a.StartedAt, a.ID, b.StartedAt, b.ID)
		}
		if a.ID == 0 {
			t.Fatal("record without id")
		}
	}
	count := func(q invoke.Query) int {
		q.Namespace, q.Function, q.Limit = "ns", "f", 1000
		p, err := recs.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Items)
	}
	cases := []struct {
		name string
		q    invoke.Query
		want int
	}{
		{"5xx", invoke.Query{StatusClass: 5}, 5},
		{"2xx", invoke.Query{StatusClass: 2}, 20},
		{"cron", invoke.Query{Trigger: invoke.TriggerCron}, 12},
		{"since", invoke.Query{Since: base.Add(10 * time.Second)}, 5}, // i = 20..24
		{"until", invoke.Query{Until: base.Add(2 * time.Second)}, 4},  // i = 0..3
		{"window", invoke.Query{Since: base.Add(time.Second), Until: base.Add(3 * time.Second)}, 4},
		{"nothing", invoke.Query{Trigger: invoke.TriggerQueue}, 0},
	}
	for _, c := range cases {
		if got := count(c.q); got != c.want {
			t.Errorf("%s: %d records, want %d", c.name, got, c.want)
		}
	}
	if p, _ := recs.List(ctx, invoke.Query{Namespace: "ns", Function: "missing"}); len(p.Items) != 0 || p.Next != nil {
		t.Fatalf("unknown function: %+v", p)
	}
}

func TestRecordsRetention(t *testing.T) {
	ctx := context.Background()
	st, _ := openTestStore(t)
	recs, _ := st.Records()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var batch []invoke.Record
	for i := 0; i < 50; i++ {
		for _, fn := range []string{"a", "b"} {
			batch = append(batch, invoke.Record{Namespace: "ns", Function: fn, Status: 200, Trigger: invoke.TriggerHTTP, StartedAt: base.Add(time.Duration(i) * time.Hour)})
		}
	}
	if err := recs.Write(ctx, invoke.Batch{ID: "r", Records: batch}); err != nil {
		t.Fatal(err)
	}
	// Small batches: the loop must go round several times.
	n, err := recs.DeleteBefore(ctx, base.Add(30*time.Hour), 7)
	if err != nil || n != 60 {
		t.Fatalf("DeleteBefore = %d, %v; want 60", n, err)
	}
	for _, fn := range []string{"a", "b"} {
		p, _ := recs.List(ctx, invoke.Query{Namespace: "ns", Function: fn, Limit: 1000})
		if len(p.Items) != 20 || p.Items[len(p.Items)-1].StartedAt.Before(base.Add(30*time.Hour)) {
			t.Fatalf("%s after retention: %d records", fn, len(p.Items))
		}
	}
}
