package kafkaq

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sless-dev/sless/pkg/queue"
)

// The mark moves only over a run of finished records from the start, and
// is due only past what was committed.
func TestOffsetsCommitContiguousRuns(t *testing.T) {
	o := newOffsets()
	var hs []*held
	for off := int64(10); off < 15; off++ {
		hs = append(hs, o.add(&kgo.Record{Offset: off, LeaderEpoch: 2}))
	}
	if _, ok := o.due(); ok {
		t.Fatal("due before any record finished")
	}
	for _, step := range []struct {
		finish int
		moved  bool
		mark   int64
	}{
		{finish: 2, moved: false, mark: -1},
		{finish: 1, moved: false, mark: -1},
		{finish: 0, moved: true, mark: 13},
		{finish: 4, moved: false, mark: 13},
		{finish: 3, moved: true, mark: 15},
	} {
		if moved := o.finish(hs[step.finish]); moved != step.moved || o.mark.Offset != step.mark {
			t.Fatalf("finish %d: moved %v, mark %d; want %v, %d", 10+step.finish, moved, o.mark.Offset, step.moved, step.mark)
		}
	}
	if eo, ok := o.due(); !ok || eo != (kgo.EpochOffset{Epoch: 2, Offset: 15}) {
		t.Fatalf("due %v %v", eo, ok)
	}
	o.committed = 15
	if _, ok := o.due(); ok {
		t.Fatal("due again after the commit")
	}
	if len(o.held) != 0 {
		t.Errorf("%d records still held", len(o.held))
	}
}

// Refusals of credentials or rights end the consumer; other errors are
// retried.
func TestAuthRefusalsArePermanent(t *testing.T) {
	for _, tc := range []struct {
		err       error
		permanent bool
	}{
		{kerr.SaslAuthenticationFailed, true},
		{kerr.TopicAuthorizationFailed, true},
		{kerr.GroupAuthorizationFailed, true},
		{kerr.UnknownTopicOrPartition, false},
		{kerr.NotCoordinator, false},
	} {
		err := permanentIf(fmt.Errorf("reach the brokers: %w", tc.err))
		if _, ok := err.(*queue.PermanentError); ok != tc.permanent {
			t.Errorf("%v: permanent %v, want %v", tc.err, ok, tc.permanent)
		}
	}
}
