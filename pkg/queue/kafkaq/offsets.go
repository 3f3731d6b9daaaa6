package kafkaq

import "github.com/twmb/franz-go/pkg/kgo"

// offsets tracks one partition's records between poll and commit. Kafka
// keeps one committed offset per partition, so the offset to commit is
// the one after the longest run of finished records from the start: a
// record still being tried holds back every later one, finished or not.
// Not safe for concurrent use; the session guards it.
type offsets struct {
	// held are the unfinished or not yet passed records, in offset order.
	held []*held
	// mark is the offset to commit (the next record to read after a
	// restart), -1 until a record finished.
	mark      kgo.EpochOffset
	committed int64
}

type held struct {
	offset   int64
	epoch    int32
	finished bool
	// retrying: its last call failed and it waits to be tried again.
	retrying bool
}

// stuck says whether the first record held waits for a retry while
// at least n records are held behind it.
func (o *offsets) stuck(n int) bool {
	return len(o.held) >= n && o.held[0].retrying
}

func newOffsets() *offsets {
	return &offsets{mark: kgo.EpochOffset{Epoch: -1, Offset: -1}, committed: -1}
}

// add holds a record just polled; records come in offset order.
func (o *offsets) add(r *kgo.Record) *held {
	h := &held{offset: r.Offset, epoch: r.LeaderEpoch}
	o.held = append(o.held, h)
	return h
}

// finish marks h done and says whether the mark moved.
func (o *offsets) finish(h *held) bool {
	h.finished = true
	moved := false
	for len(o.held) > 0 && o.held[0].finished {
		o.mark = kgo.EpochOffset{Epoch: o.held[0].epoch, Offset: o.held[0].offset + 1}
		o.held[0] = nil
		o.held = o.held[1:]
		moved = true
	}
	return moved
}

// due is the mark when it is past what was committed.
func (o *offsets) due() (kgo.EpochOffset, bool) {
	return o.mark, o.mark.Offset > o.committed
}
