// Package statstest makes invocation histories for the tests and
// benchmarks of the charts' aggregate: the same records from the same
// seed, whatever store they go to.
package statstest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
)

// History is n calls of namespace/function spread over [from, from+span):
// durations from 1 ms to about 2 s, one call in 20 a 500, one in 50 a cold
// start, all with trigger (TriggerService makes them a service's). The same
// seed gives the same records.
func History(namespace, function, trigger string, from time.Time, span time.Duration, n int, seed uint64) []invoke.Record {
	rng := rand.New(rand.NewPCG(seed, seed^0x5e55))
	out := make([]invoke.Record, n)
	for i := range out {
		status := 200
		switch rng.IntN(20) {
		case 0:
			status = 500
		case 1:
			status = 404
		}
		// Most calls are quick, a few slow: the percentiles tell apart.
		d := time.Duration(1000+rng.IntN(40000)) * time.Microsecond
		if rng.IntN(10) == 0 {
			d += time.Duration(rng.IntN(2_000_000)) * time.Microsecond
		}
		out[i] = invoke.Record{
			Namespace: namespace, Function: function, Trigger: trigger, Revision: function + "-00001",
			RequestID: fmt.Sprintf("%s-%d-%d", function, seed, i),
			StartedAt: from.Add(time.Duration(rng.Int64N(int64(span/time.Microsecond))) * time.Microsecond).UTC(),
			Duration:  d, Status: status, ColdStart: rng.IntN(50) == 0,
		}
	}
	return out
}
