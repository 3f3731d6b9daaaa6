package queue

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sless-dev/sless/pkg/retry"
)

// InvokeReachable makes the call, trying again while the proxy refuses the
// connection or does not answer the dial, for at most wait. Such a call
// never reached the function (nothing was sent), so trying again cannot
// call it twice, while a run lost to an API restart is a missed schedule.
// Anything else — an answer of any status, an error after the request was
// sent, a host name that does not exist — is the outcome as it is: a Job
// is never retried, because calling a function with side effects twice is
// the user's choice.
// Each wait is told on log.
func (iv *Invoker) InvokeReachable(ctx context.Context, c Call, wait time.Duration, sleep func(context.Context, time.Duration) error, log io.Writer) Outcome {
	giveUp := time.Now().Add(wait)
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		out := iv.Invoke(ctx, c)
		if out.Err == nil || !retry.NothingSent(out.Err) {
			return out
		}
		left := time.Until(giveUp)
		if left <= 0 || ctx.Err() != nil {
			out.Err = fmt.Errorf("nothing answers at %s after %d attempts in %v (the proxy, sless-api, is down or unreachable): %w",
				iv.URL, attempt, wait, out.Err)
			return out
		}
		d := min(backoff, left)
		fmt.Fprintf(log, "sless cron-call: %s unreachable (%v); trying again in %v\n", iv.URL, out.Err, d.Round(time.Millisecond))
		if err := sleep(ctx, d); err != nil {
			out.Err = fmt.Errorf("%w (gave up waiting for %s: %w)", out.Err, iv.URL, err)
			return out
		}
		backoff = min(backoff*2, 4*time.Second)
	}
}
