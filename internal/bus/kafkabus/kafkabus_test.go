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

// TestStaticMemberTakesBackItsPartitions: a static member does not leave its group when it
// stops (so its stop here is what a kill is to the group); coming back with the same instance ID
// it replaces itself and its partitions are consumed again long before its session (a minute
// here) would end. Were it joining as a new member, the rebalance would wait for that session.
// (The fault harness shows the dynamic case: its killed evaluators' partitions stood still for
// 16 s in a quarter of the runs.)
func TestStaticMemberTakesBackItsPartitions(t *testing.T) {
	t.Parallel()
	base := kafkabus.Config{Brokers: kafkatest.NewCluster(t, 1), ConsumerGroup: "evaluate", Partitions: 4}
	base = kafkabus.WithSaramaTuning(base, func(sc *sarama.Config) {
		sc.Consumer.Group.Session.Timeout = time.Minute
		sc.Consumer.Group.Rebalance.Timeout = time.Minute
	})
	member := func(id string) kafkabus.Config { c := base; c.InstanceID = id; return c }
	const topic = "evidence"
	pub := mustPublisher(t, base)
	publishAll := func(round int) {
		t.Helper()
		for k := range 16 {
			if err := pub.Publish(topic, keyed(fmt.Sprint("trail-", k), fmt.Sprint(round, "/", k))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// drain receives round's 16 messages from any of chans, acking each.
	drain := func(round int, chans ...<-chan *message.Message) {
		t.Helper()
		seen := map[string]bool{}
		deadline := time.After(receiveTimeout)
		for len(seen) < 16 {
			for _, c := range chans {
				select {
				case msg := <-c:
					msg.Ack()
					if p := string(msg.Payload); len(p) > 2 && p[:len(fmt.Sprint(round))+1] == fmt.Sprint(round, "/") {
						seen[p] = true
					}
				case <-deadline:
					t.Fatalf("round %d: %d of 16 messages within %v", round, len(seen), receiveTimeout)
				default:
				}
			}
			time.Sleep(time.Millisecond)
		}
	}
	first, msgs1 := mustSubscribe(t, member("evaluate-1"), topic)
	_, msgs2 := mustSubscribe(t, member("evaluate-2"), topic)
	publishAll(1)
	drain(1, msgs1, msgs2)
	if err := first.Close(); err != nil { // a static member does not leave: as if killed
		t.Fatal(err)
	}
	_, again := mustSubscribe(t, member("evaluate-1"), topic)
	publishAll(2)
	drain(2, again, msgs2)
}

// TestStoppedStaticMemberPartitionsMove: a static member that stops for good (killed, its pod
// gone) keeps its partitions only for its session; then the group hands them to the member
// left, which consumes every message, those of the stopped member's partitions included.
func TestStoppedStaticMemberPartitionsMove(t *testing.T) {
	t.Parallel()
	base := kafkabus.Config{Brokers: kafkatest.NewCluster(t, 1), ConsumerGroup: "evaluate", Partitions: 4}
	member := func(id string) kafkabus.Config { c := base; c.InstanceID = id; return c }
	const topic = "evidence"
	pub := mustPublisher(t, base)
	first, _ := mustSubscribe(t, member("evaluate-1"), topic)
	_, msgs2 := mustSubscribe(t, member("evaluate-2"), topic)
	if err := first.Close(); err != nil { // a static member does not leave: as if killed
		t.Fatal(err)
	}
	want := map[string]bool{}
	for k := range 16 {
		p := fmt.Sprint("m", k)
		want[p] = true
		if err := pub.Publish(topic, keyed(fmt.Sprint("trail-", k), p)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(kafkabus.DefaultSessionTimeout + receiveTimeout)
	for len(want) > 0 {
		select {
		case msg := <-msgs2:
			msg.Ack()
			delete(want, string(msg.Payload))
		case <-deadline:
			t.Fatalf("%d of 16 messages were not consumed by the member left: %v", len(want), want)
		}
	}
}
