package queue

import (
	"sync"
	"time"
)

// State is what a consumer is doing, for readiness: Kubernetes' probe on
// `sless consume` and the Trigger status under sless dev read it.
type State struct {
	// Consuming: connected, the queues declared, and the queue consumed.
	Consuming bool
	// Err is why the consumer is not consuming: the error of its last try
	// to connect, declare or consume, or of the session the broker ended.
	// Nil while it consumes and before its first try ends.
	Err error
	// Stopped: Run ends or has ended, because its context ended (the
	// calls in flight may still finish) or after an error no retry can
	// mend (Err then).
	Stopped bool
	// Since is when the state last changed.
	Since time.Time
}

// Ready says whether the consumer takes messages now.
func (s State) Ready() bool { return s.Consuming && !s.Stopped }

// state holds a consumer's State for readers on other goroutines, and wakes
// them on each change.
type state struct {
	mu      sync.Mutex
	cur     State
	changed chan struct{}
}

func newState() *state {
	return &state{cur: State{Since: time.Now()}, changed: make(chan struct{})}
}

func (s *state) get() (State, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.changed
}

// set records a new state; one equal to the current one (the same error
// again on every reconnect) wakes no one.
func (s *state) set(consuming bool, err error, stopped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.Consuming == consuming && s.cur.Stopped == stopped && errorText(s.cur.Err) == errorText(err) {
		return
	}
	s.cur = State{Consuming: consuming, Err: err, Stopped: stopped, Since: time.Now()}
	close(s.changed)
	s.changed = make(chan struct{})
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
