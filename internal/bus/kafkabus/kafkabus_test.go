package kafkabus_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/bus/kafkabus/kafkatest"
)

const receiveTimeout = 15 * time.Second

func mustPublisher(t *testing.T, cfg kafkabus.Config) message.Publisher {
	t.Helper()
	pub, err := kafkabus.NewPublisher(cfg, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

func mustSubscribe(t *testing.T, cfg kafkabus.Config, topic string) (message.Subscriber, <-chan *message.Message) {
	t.Helper()
	sub, err := kafkabus.NewSubscriber(cfg, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	msgs, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return sub, msgs
}

func receive(t *testing.T, msgs <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case msg, ok := <-msgs:
		if !ok {
			t.Fatal("messages channel closed")
		}
		return msg
	case <-time.After(receiveTimeout):
		t.Fatal("no message within", receiveTimeout)
		return nil
	}
}

func keyed(key string, payload string) *message.Message {
	msg := message.NewMessage(watermill.NewUUID(), []byte(payload))
	if key != "" {
		msg.Metadata.Set(kafkabus.PartitionKeyMetadata, key)
	}
	return msg
}

// TestSameKeyConsumedInPublishOrder publishes interleaved trails, one message
// at a time and in batches, and checks each trail arrives whole, in order
// and from a single partition.
func TestSameKeyConsumedInPublishOrder(t *testing.T) {
	t.Parallel()
	cfg := kafkabus.Config{Brokers: kafkatest.NewCluster(t, 4), ConsumerGroup: "evaluate", Partitions: 4}
	const topic, trails, perTrail = "evidence", 5, 40
	pub := mustPublisher(t, cfg)
	for i := range perTrail {
		var batch []*message.Message
		for trail := range trails {
			batch = append(batch, keyed(fmt.Sprintf("trail-%d", trail), strconv.Itoa(i)))
		}
		if i%2 == 0 {
			if err := pub.Publish(topic, batch...); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, msg := range batch {
			if err := pub.Publish(topic, msg); err != nil {
				t.Fatal(err)
			}
		}
	}

	_, msgs := mustSubscribe(t, cfg, topic)
	next := map[string]int{}
	partitionOf := map[string]int32{}
	for range trails * perTrail {
		msg := receive(t, msgs)
		key := msg.Metadata.Get(kafkabus.PartitionKeyMetadata)
		if got := string(msg.Payload); got != strconv.Itoa(next[key]) {
			t.Fatalf("%s: got message %s, want %d", key, got, next[key])
		}
		next[key]++
		partition, _ := kafka.MessagePartitionFromCtx(msg.Context())
		if p, seen := partitionOf[key]; seen && p != partition {
			t.Fatalf("%s: message on partition %d, earlier ones on %d", key, partition, p)
		}
		partitionOf[key] = partition
		msg.Ack()
	}
	if len(next) != trails {
		t.Fatalf("got %d trails, want %d", len(next), trails)
	}
}

// TestRestartedSubscriberResumesAfterLastAck stops a subscriber holding an
// unacked message and checks that its successor in the group gets exactly
// that message and the later ones.
func TestRestartedSubscriberResumesAfterLastAck(t *testing.T) {
	t.Parallel()
	cfg := kafkabus.Config{Brokers: kafkatest.NewCluster(t, 3), ConsumerGroup: "evaluate", Partitions: 3}
	const topic, total, acked = "evidence", 10, 5
	pub := mustPublisher(t, cfg)
	for i := range total {
		if err := pub.Publish(topic, keyed("trail-1", strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}

	first, msgs := mustSubscribe(t, cfg, topic)
	for i := range acked {
		msg := receive(t, msgs)
		if got := string(msg.Payload); got != strconv.Itoa(i) {
			t.Fatalf("first subscriber: got message %s, want %d", got, i)
		}
		msg.Ack()
	}
	if unacked := receive(t, msgs); string(unacked.Payload) != strconv.Itoa(acked) {
		t.Fatalf("first subscriber: got message %s, want %d", unacked.Payload, acked)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	_, msgs = mustSubscribe(t, cfg, topic)
	for i := acked; i < total; i++ {
		msg := receive(t, msgs)
		if got := string(msg.Payload); got != strconv.Itoa(i) {
			t.Fatalf("restarted subscriber: got message %s, want %d", got, i)
		}
		msg.Ack()
	}
	select {
	case msg := <-msgs:
		t.Fatalf("restarted subscriber: unexpected message %s", msg.Payload)
	case <-time.After(time.Second):
	}
}

// TestKeylessMessagesSpread checks that messages without a partition key
// publish, on a fresh cluster, and do not all land on one partition.
func TestKeylessMessagesSpread(t *testing.T) {
	t.Parallel()
	cfg := kafkabus.Config{Brokers: kafkatest.NewCluster(t, 4), ConsumerGroup: "evaluate", Partitions: 4}
	const topic, total = "evidence", 40
	pub := mustPublisher(t, cfg)
	for i := range total {
		if err := pub.Publish(topic, keyed("", strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	_, msgs := mustSubscribe(t, cfg, topic)
	partitions := map[int32]bool{}
	for range total {
		msg := receive(t, msgs)
		partition, _ := kafka.MessagePartitionFromCtx(msg.Context())
		partitions[partition] = true
		msg.Ack()
	}
	if len(partitions) < 2 {
		t.Fatalf("%d keyless messages all landed on partitions %v", total, partitions)
	}
}

// TestPublisherWaitsForAllReplicasIdempotently watches the produce requests
// the broker receives.
func TestPublisherWaitsForAllReplicasIdempotently(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)

	var mu sync.Mutex
	var acks []int16
	var producerIDs []int64
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		produce := req.(*kmsg.ProduceRequest)
		mu.Lock()
		defer mu.Unlock()
		acks = append(acks, produce.Acks)
		for _, topic := range produce.Topics {
			for _, partition := range topic.Partitions {
				var batch kmsg.RecordBatch
				if err := batch.ReadFrom(partition.Records); err == nil {
					producerIDs = append(producerIDs, batch.ProducerID)
				}
			}
		}
		return nil, nil, false // observe only
	})

	pub := mustPublisher(t, kafkabus.Config{Brokers: cluster.ListenAddrs()})
	for i := range 3 {
		if err := pub.Publish("evidence", keyed("trail-1", strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if len(acks) == 0 || len(producerIDs) == 0 {
		t.Fatalf("saw %d produce requests with %d record batches", len(acks), len(producerIDs))
	}
	for _, a := range acks {
		if a != -1 {
			t.Errorf("produce request with acks=%d, want -1 (all in-sync replicas)", a)
		}
	}
	for _, id := range producerIDs {
		if id < 0 {
			t.Errorf("record batch with producer ID %d: producer is not idempotent", id)
		}
	}
}

func TestEnsureTopics(t *testing.T) {
	t.Parallel()
	cfg := kafkabus.Config{Brokers: kafkatest.NewCluster(t, 1), Partitions: 5}
	ctx := context.Background()
	if err := kafkabus.EnsureTopics(ctx, cfg, "evidence", "verdicts"); err != nil {
		t.Fatal(err)
	}
	// Existing topics are kept as they are, and creating them again is fine.
	cfg.Partitions = 7
	if err := kafkabus.EnsureTopics(ctx, cfg, "evidence", "verdicts", "audit"); err != nil {
		t.Fatal(err)
	}

	admin, err := sarama.NewClusterAdmin(cfg.Brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int32{"evidence": 5, "verdicts": 5, "audit": 7} {
		if got := topics[topic].NumPartitions; got != want {
			t.Errorf("%s: %d partitions, want %d", topic, got, want)
		}
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := kafkabus.EnsureTopics(canceled, cfg, "other"); err == nil {
		t.Error("EnsureTopics with a canceled context succeeded")
	}
	if err := kafkabus.EnsureTopics(ctx, kafkabus.Config{}, "other"); err == nil {
		t.Error("EnsureTopics without brokers succeeded")
	}
}
