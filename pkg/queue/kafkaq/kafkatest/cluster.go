// Package kafkatest runs franz-go's kfake Kafka cluster inside the test
// process, on a free loopback port, with its data in a directory of the
// test's. No Kafka broker is installable on the machines the tests run on
// (its JVM artefacts are not reachable), so kafka triggers are tested on
// kfake, which speaks Kafka's wire protocol (groups, offsets, SASL) as a
// broker does. It is a test-only module: the consumer knows nothing of it.
package kafkatest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sless-dev/sless/pkg/queue/queuetest"
)

// Cluster is a one-broker kfake cluster that keeps its data across a
// restart on the same port.
type Cluster struct {
	t    testing.TB
	opts []kfake.Opt
	c    *kfake.Cluster
	// Addr is the broker's host:port.
	Addr string
}

// Option adds a kfake option (SASL users, say).
type Option = kfake.Opt

// Start runs a cluster until the test ends.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	port := queuetest.FreePort(t)
	c := &Cluster{t: t, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		// kfake listens on 127.0.0.1 at the ports given.
		opts: append([]kfake.Opt{kfake.Ports(port), kfake.DataDir(t.TempDir())}, opts...)}
	c.Restart()
	t.Cleanup(c.Stop)
	return c
}

// Stop shuts the broker down, as a crash would for its clients; Restart
// brings it back on the same port with the same topics, records and
// committed offsets.
func (c *Cluster) Stop() {
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
}

// Restart starts the broker (again).
func (c *Cluster) Restart() {
	c.t.Helper()
	var err error
	// The port may linger a moment after the broker before it closed.
	for try := 0; ; try++ {
		if c.c, err = kfake.NewCluster(c.opts...); err == nil || try == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("start kfake: %v", err)
	}
}

// Client is a client of the cluster, closed when the test ends.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addr)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// Topic creates a topic of partitions partitions.
func (c *Cluster) Topic(name string, partitions int32) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := kadm.NewClient(c.Client()).CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		c.t.Fatalf("create topic %s: %v", name, err)
	}
}

// Produce writes n records to topic, keyed and valued {"n":i}, with key
// prefix-i, and waits until the broker has them.
func Produce(t testing.TB, cl *kgo.Client, topic, prefix string, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(prefix + "-" + strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"n":%d}`, i),
			Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// Committed is the group's committed offsets of topic, by partition.
func Committed(t testing.TB, cl *kgo.Client, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		out[p] = o.At
	}
	return out
}

// Ends is the end offset of each partition of topic.
func Ends(t testing.TB, cl *kgo.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// Records reads every record of topic from its start.
func Records(t testing.TB, c *Cluster, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d records of %s read", len(out), want, topic)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// AwaitCommitted waits until group committed every record of topic.
func AwaitCommitted(t testing.TB, c *Cluster, group, topic string) {
	t.Helper()
	cl := c.Client()
	deadline := time.Now().Add(time.Minute)
	for {
		ends, got := Ends(t, cl, topic), Committed(t, cl, group, topic)
		done := true
		for p, end := range ends {
			done = done && got[p] == end
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s committed %v of topic %s, whose ends are %v", group, got, topic, ends)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
