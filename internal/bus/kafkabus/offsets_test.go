package kafkabus_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/bus/kafkabus/kafkatest"
)

// TestOffsetsAndPositions: End gives, per partition, the offset after the last message
// published, and Position tells where each consumed message lies, so the highest position
// consumed plus one reaches End once everything is consumed.
func TestOffsetsAndPositions(t *testing.T) {
	cfg := kafkabus.Config{Brokers: kafkatest.NewCluster(t, 3), ConsumerGroup: "evaluate", Partitions: 3}
	const topic = "offsets"
	ctx := context.Background()
	if err := kafkabus.EnsureTopics(ctx, cfg, topic); err != nil {
		t.Fatal(err)
	}
	offsets, err := kafkabus.NewOffsets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = offsets.Close() })
	ends, err := offsets.End(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(ends, map[int32]int64{0: 0, 1: 0, 2: 0}) {
		t.Fatalf("End of an empty topic = %v", ends)
	}

	pub := mustPublisher(t, cfg)
	const n = 30
	for i := range n {
		m := message.NewMessage(fmt.Sprint("m", i), nil)
		m.Metadata.Set(kafkabus.PartitionKeyMetadata, fmt.Sprint("key-", i%7))
		if err := pub.Publish(topic, m); err != nil {
			t.Fatal(err)
		}
	}
	ends, err = offsets.End(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, e := range ends {
		total += e
	}
	if len(ends) != 3 || total != n {
		t.Fatalf("End after %d messages = %v", n, ends)
	}

	_, msgs := mustSubscribe(t, cfg, topic)
	next := map[int32]int64{}
	for range n {
		m := receive(t, msgs)
		pos, ok := kafkabus.MessagePosition(m)
		p, o := pos.Partition, pos.Offset
		if !ok {
			t.Fatalf("no position for %s", m.UUID)
		}
		next[p] = max(next[p], o+1)
		m.Ack()
	}
	for p, e := range ends {
		if next[p] != e {
			t.Fatalf("consumed up to %v, End says %v", next, ends)
		}
	}
	if _, ok := kafkabus.MessagePosition(message.NewMessage("x", nil)); ok {
		t.Fatal("a message that did not come from Kafka has a position")
	}
}
