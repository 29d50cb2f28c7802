package backlog_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/bus/backlog"
	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/bus/kafkabus/kafkatest"
)

// TestHoldsKafkaPublishes runs the gate as the ingest tier does, on a Kafka broker (kfake): the
// ends come from the broker's ListOffsets, the positions from what a consumer recorded.
func TestHoldsKafkaPublishes(t *testing.T) {
	ctx := context.Background()
	cfg := kafkabus.Config{Brokers: kafkatest.NewCluster(t, 2), Partitions: 2}
	const topic = "evidence"
	if err := kafkabus.EnsureTopics(ctx, cfg, topic); err != nil {
		t.Fatal(err)
	}
	pub, err := kafkabus.NewPublisher(cfg, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	offsets, err := kafkabus.NewOffsets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { offsets.Close() })

	var measured atomic.Int64
	var mu sync.Mutex
	positions := map[int32]int64{} // the consumer has applied nothing
	gate := backlog.New(pub, backlog.Config{Topic: topic, Max: 3, MaxWait: time.Hour, Poll: time.Millisecond,
		Ends: func(ctx context.Context) (map[int32]int64, error) {
			measured.Add(1)
			return offsets.End(ctx, topic)
		},
		Positions: func(context.Context) (map[int32]int64, error) {
			mu.Lock()
			defer mu.Unlock()
			return map[int32]int64{0: positions[0], 1: positions[1]}, nil
		}})
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { gate.Run(runCtx); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })

	msg := func(key string) *message.Message {
		m := message.NewMessage(watermill.NewUUID(), []byte(key))
		m.Metadata.Set("partition_key", key)
		return m
	}
	for i := range 4 {
		if err := gate.Publish(topic, msg(string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	// Once a measurement started after the four publishes has ended, the gate knows they are
	// all behind: the fifth waits.
	n := measured.Load()
	for measured.Load() < n+2 {
		time.Sleep(time.Millisecond)
	}
	if got := gate.Backlog(); got != 4 {
		t.Fatalf("backlog %d, want 4", got)
	}
	fifth := make(chan error, 1)
	go func() { fifth <- gate.Publish(topic, msg("e")) }()
	n = measured.Load()
	for measured.Load() < n+2 {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-fifth:
		t.Fatalf("the fifth publish went ahead of a consumer 4 behind (err %v)", err)
	default:
	}

	// The consumer catches up: the fifth goes.
	ends, err := offsets.End(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	positions = ends
	mu.Unlock()
	if err := <-fifth; err != nil {
		t.Fatal(err)
	}
	if total := ends[0] + ends[1]; total != 4 {
		t.Fatalf("the broker holds %d messages, want 4", total)
	}
}
