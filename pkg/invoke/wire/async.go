package wire

import "time"

// AsyncState is where an asynchronous call is in its life.
type AsyncState string

// The states of an asynchronous call.
const (
	AsyncQueued       AsyncState = "queued"
	AsyncRunning      AsyncState = "running"
	AsyncSucceeded    AsyncState = "succeeded"
	AsyncFailed       AsyncState = "failed"
	AsyncDeadLettered AsyncState = "dead-lettered"
)

// Done reports whether s is final.
func (s AsyncState) Done() bool {
	return s == AsyncSucceeded || s == AsyncFailed || s == AsyncDeadLettered
}

// AsyncInvocation is the record of a call made with Prefer: respond-async,
// as GET …/functions/{name}/invocations/{id} writes it.
type AsyncInvocation struct {
	RequestID      string         `json:"requestId"`
	Namespace      string         `json:"namespace"`
	Function       string         `json:"function"`
	Mode           string         `json:"mode"`
	State          AsyncState     `json:"state"`
	Attempts       int            `json:"attempts"`
	Method         string         `json:"method"`
	Path           string         `json:"path"`
	IdempotencyKey string         `json:"idempotencyKey,omitempty"`
	AcceptedAt     time.Time      `json:"acceptedAt"`
	StartedAt      *time.Time     `json:"startedAt,omitempty"`
	FinishedAt     *time.Time     `json:"finishedAt,omitempty"`
	NextAttemptAt  *time.Time     `json:"nextAttemptAt,omitempty"`
	LastError      string         `json:"lastError,omitempty"`
	Response       *AsyncResponse `json:"response,omitempty"`
	Callback       *Callback      `json:"callback,omitempty"`
}

// Done says whether the call reached a final state.
func (a *AsyncInvocation) Done() bool { return a.State.Done() }

// AsyncResponse is the function's answer: Body when it is UTF-8 text,
// BodyBase64 otherwise.
type AsyncResponse struct {
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 []byte            `json:"bodyBase64,omitempty"`
	Bytes      int64             `json:"bytes"`
	Truncated  bool              `json:"truncated,omitempty"`
}

// CallbackState is where the posting of a result stands.
type CallbackState string

// The states of a Callback.
const (
	CallbackPending   CallbackState = "pending"
	CallbackDelivered CallbackState = "delivered"
	CallbackFailed    CallbackState = "failed"
)

// Callback is the posting of a call's result to its URL.
type Callback struct {
	URL   string        `json:"url"`
	State CallbackState `json:"state"`
	// Attempts counts the deliveries tried; Status is what the receiver
	// answered the last (0: no answer).
	Attempts  int    `json:"attempts"`
	Status    int    `json:"status,omitempty"`
	LastError string `json:"lastError,omitempty"`
	// NextAttemptAt is when a retry is due; FinishedAt when the result was
	// delivered or given up on.
	NextAttemptAt time.Time `json:"nextAttemptAt,omitzero"`
	FinishedAt    time.Time `json:"finishedAt,omitzero"`
}

// CallbackSigningKey is the key a namespace's callbacks are signed with,
// as GET …/callbacks/signing-key writes it.
type CallbackSigningKey struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	// Header and Scheme say how deliveries carry the signature.
	Header string `json:"header"`
	Scheme string `json:"scheme"`
}
