package local

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/queue"
)

// A queue message over the invoke path's body cap is answered 413 and
// recorded as the proxy would on a cluster (where the consumer's call goes
// through it), so it is retried and dead-lettered in both modes rather than
// reaching the function only under sless dev.
func TestQueueMessageOverTheBodyCap(t *testing.T) {
	ctx := context.Background()
	r := newRunsRig(t, ServerOptions{IdleTimeout: time.Minute})
	fn := newFunction("ns", "worker")
	r.serve(ctx, t, fn, "def handler(event, context):\n    return {'ok': True}\n")
	caller := &localCaller{r: r.runs, namespace: "ns", function: "worker"}

	at := caller.Invoke(ctx, queue.Call{Body: []byte(`{"n": 1}`), ContentType: "application/json", RequestID: "small"})
	if at.Status != http.StatusOK {
		t.Fatalf("a small message: %+v, want 200 from the function", at)
	}
	over := caller.Invoke(ctx, queue.Call{Body: make([]byte, invoke.DefaultMaxRequestBytes+1), ContentType: "application/octet-stream", RequestID: "big"})
	if over.Status != http.StatusRequestEntityTooLarge || !strings.Contains(over.PlatformError, "over the") {
		t.Fatalf("a message one byte over the cap: status %d, platform error %q; want 413 from sless", over.Status, over.PlatformError)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := r.records.List(ctx, invoke.Query{Namespace: "ns", Function: "worker", Trigger: invoke.TriggerQueue, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range p.Items {
			if rec.RequestID == "big" {
				if rec.Status != http.StatusRequestEntityTooLarge || rec.Error == "" || rec.Revision != "" || rec.BytesIn != invoke.DefaultMaxRequestBytes+1 {
					t.Fatalf("record of the big message: %+v", rec)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of the big message: %+v", p.Items)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
