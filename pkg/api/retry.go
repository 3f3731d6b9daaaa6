package api

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// raceBudget is how long a request without a precondition keeps trying to
// land its change against writers that keep winning the update race. Its
// meaning is "make it so", so giving up early would hand the client a 409
// it did nothing to cause; ten seconds covers dozens of writers at once on
// one object, well inside any client's timeout.
const raceBudget = 10 * time.Second

// raceRetry paces read-modify-write rounds that lost an update race. The
// backoff is jittered over its whole span, so writers that lost together do
// not read and write again together and lose again.
type raceRetry struct {
	backoff  wait.Backoff
	deadline time.Time
}

func newRaceRetry() *raceRetry {
	return &raceRetry{
		backoff:  wait.Backoff{Duration: 2 * time.Millisecond, Factor: 2, Jitter: 1, Steps: 8, Cap: 250 * time.Millisecond},
		deadline: time.Now().Add(raceBudget),
	}
}

// again waits out the next step and says whether to read and try again:
// false once the budget would be passed or the caller has gone.
func (r *raceRetry) again(ctx context.Context) bool {
	d := r.backoff.Step()
	if time.Now().Add(d).After(r.deadline) {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// lostRace answers a write that still lost the update race when its retries
// ran out. The 409 says Retry-After: the conflict passes once the other
// writers do, unlike a stale metadata.resourceVersion, which no wait mends
// (the Go client retries a 409 only when told to come back).
func lostRace(err error) *Problem {
	if !apierrors.IsConflict(err) {
		return storeProblem(err)
	}
	return conflict("other writers kept changing the object for %s; try again", raceBudget).withRetry(1)
}
