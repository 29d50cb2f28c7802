package devkafka

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRestartKeepsMessagesAndOffsets starts a broker on a data directory, produces three
// messages and commits a group's offset past the first two, then starts a new broker on the
// same port and directory: the group resumes at the third message.
func TestRestartKeepsMessagesAndOffsets(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Config{DataDir: dir, Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Addrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"one", "two", "three"} {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	prod.Close()
	first := consume(ctx, t, addr, 3)
	if got := values(first); got != "one,two,three" {
		t.Fatalf("consumed %s before the restart", got)
	}
	commit(ctx, t, addr, first[1])
	b.Close()

	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	b, err = Start(Config{Port: p, DataDir: dir, Partitions: 1})
	if err != nil {
		t.Fatalf("restart on port %d: %v", p, err)
	}
	defer b.Close()
	if b.Addrs()[0] != addr {
		t.Fatalf("restarted on %s, want %s", b.Addrs()[0], addr)
	}
	if got := values(consume(ctx, t, addr, 1)); got != "three" {
		t.Fatalf("after the restart the group resumed with %s, want three", got)
	}
}

// consume joins group g and returns the next n records.
func consume(ctx context.Context, t *testing.T, addr string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), n, err)
		}
		for _, e := range fs.Errors() {
			t.Logf("fetch: %v", e.Err)
		}
		got = append(got, fs.Records()...)
	}
	return got
}

// commit records group g's offset as past r.
func commit(ctx context.Context, t *testing.T, addr string, r *kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.CommitRecords(ctx, r); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func values(rs []*kgo.Record) string {
	s := ""
	for i, r := range rs {
		if i > 0 {
			s += ","
		}
		s += string(r.Value)
	}
	return s
}
