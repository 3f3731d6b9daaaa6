package async

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sless-dev/sless/pkg/invoke/callback"
)

// Result is the document a callback receives: the call's final state and
// the function's answer as the record shows it.
type Result struct {
	RequestID  string        `json:"requestId"`
	Namespace  string        `json:"namespace"`
	Function   string        `json:"function"`
	State      State         `json:"state"`
	Attempts   int           `json:"attempts"`
	AcceptedAt time.Time     `json:"acceptedAt"`
	FinishedAt time.Time     `json:"finishedAt"`
	LastError  string        `json:"lastError,omitempty"`
	Response   *ResponseView `json:"response,omitempty"`
}

// ResultOf is the Result of a final j.
func ResultOf(j *Job) Result {
	v := ViewOf(j)
	return Result{RequestID: j.RequestID, Namespace: j.Namespace, Function: j.Function, State: j.State,
		Attempts: j.Attempts, AcceptedAt: j.AcceptedAt.UTC(), FinishedAt: j.FinishedAt.UTC(), LastError: j.LastError,
		Response: v.Response}
}

// deliver posts j's result until it is delivered, a delivery fails in a way
// no retry mends, CallbackAttempts are spent or the runner stops (then a
// restart delivers it).
func (r *Runner) deliver(j *Job) {
	for j.CallbackPending() {
		if !waitUntil(r.ctx, j.Callback.NextAttemptAt) || !r.deliverOnce(r.ctx, j) {
			return
		}
	}
}

// deliverOnce posts j's result once and records the outcome: delivered,
// given up, or a retry due at Callback.NextAttemptAt. It is false when a
// shutdown cut the delivery, which is then made again after a restart.
func (r *Runner) deliverOnce(ctx context.Context, j *Job) bool {
	cb := j.Callback
	body, err := json.Marshal(ResultOf(j))
	if err != nil {
		r.endCallback(j, CallbackFailed, "cannot encode the result: "+err.Error(), "failed")
		return true
	}
	key, err := r.Keys.SigningKey(ctx, j.Namespace)
	status := 0
	if err == nil {
		status, err = r.Callbacks.Post(ctx, cb.URL, key, j.RequestID, cb.Attempts+1, body)
	}
	if ctx.Err() != nil {
		return false
	}
	cb.Attempts++
	cb.Status = status
	r.metrics.callbackAttempts.Inc()
	switch {
	case err == nil:
		r.endCallback(j, CallbackDelivered, "", "delivered")
		return true
	case callback.IsRefused(err):
		r.endCallback(j, CallbackFailed, err.Error(), "refused")
		return true
	case !callback.Retryable(status, err) || cb.Attempts >= r.CallbackAttempts:
		r.endCallback(j, CallbackFailed, err.Error(), "failed")
		return true
	}
	cb.LastError = err.Error()
	cb.NextAttemptAt = time.Now().Add(r.Backoff(cb.Attempts))
	r.save(j)
	return true
}

func (r *Runner) endCallback(j *Job, s CallbackState, lastError, outcome string) {
	cb := j.Callback
	cb.State, cb.LastError, cb.NextAttemptAt, cb.FinishedAt = s, lastError, time.Time{}, time.Now()
	r.metrics.callbacks.WithLabelValues(outcome).Inc()
	if s != CallbackDelivered {
		r.Logger.Warn("the result of an asynchronous call was not delivered", "namespace", j.Namespace, "function", j.Function,
			"requestId", j.RequestID, "url", cb.URL, "attempts", cb.Attempts, "error", lastError)
	}
	r.save(j)
}
