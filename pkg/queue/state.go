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

// Tracker holds a consumer's State for readers on other goroutines, and
// wakes them on each change. Every broker's consumer keeps one.
type Tracker struct {
	mu      sync.Mutex
	cur     State
	changed chan struct{}
}

// NewTracker is a Tracker of a consumer that has not tried to connect yet.
func NewTracker() *Tracker {
	return &Tracker{cur: State{Since: time.Now()}, changed: make(chan struct{})}
}

// Get is the current state and a channel closed at its next change.
func (s *Tracker) Get() (State, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.changed
}

// Set records a new state; one equal to the current one (the same error
// again on every reconnect) wakes no one.
func (s *Tracker) Set(consuming bool, err error, stopped bool) {
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
