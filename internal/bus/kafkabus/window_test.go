package kafkabus_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/bus/kafkabus/kafkatest"
)

// TestWindow checks the MaxInFlight contract on Kafka: up to MaxInFlight messages of a partition
// arrive before any ack, in order, with their positions; a nack delivers the nacked message and
// the ones after it again, in order; and a subscriber closed mid-window leaves the unacked rest
// to the next member of the group, after the acked prefix.
func TestWindow(t *testing.T) {
	t.Parallel()
	cfg := kafkabus.WithSaramaTuning(kafkabus.Config{Brokers: kafkatest.NewCluster(t, 1), ConsumerGroup: "evaluate",
		Partitions: 1, MaxInFlight: 4}, fastRebalance)
	const topic = "evidence"
	pub := mustPublisher(t, cfg)
	for i := range 10 {
		if err := pub.Publish(topic, keyed("trail-1", strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	sub, msgs := mustSubscribe(t, cfg, topic)

	payloads := func(ms []*message.Message) []string {
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = string(m.Payload)
		}
		return out
	}
	want := func(got []*message.Message, from int) {
		t.Helper()
		for i, m := range got {
			if string(m.Payload) != strconv.Itoa(from+i) {
				t.Fatalf("got %v, want messages from %d in order", payloads(got), from)
			}
			if p, ok := kafkabus.MessagePosition(m); !ok || p.Offset != int64(from+i) {
				t.Fatalf("message %s: position %+v, %v; want offset %d", m.Payload, p, ok, from+i)
			}
		}
	}
	take := func(n int) []*message.Message {
		t.Helper()
		out := make([]*message.Message, n)
		for i := range out {
			out[i] = receive(t, msgs)
		}
		return out
	}
	nothing := func() {
		t.Helper()
		select {
		case m := <-msgs:
			t.Fatalf("message %s arrived beyond a full window", m.Payload)
		case <-time.After(100 * time.Millisecond):
		}
	}

	window := take(4) // the first window, before any ack
	want(window, 0)
	nothing()
	window[0].Ack()
	window[1].Ack()
	window[2].Nack() // 2 and 3 come again, then the rest
	window[3].Ack()  // acked after a nack before it: delivered again all the same (at least once)
	again := take(4)
	want(again, 2)
	for _, m := range again[:3] {
		m.Ack() // 2, 3, 4 done; 5 left unacked
	}
	// Closing with 5 unacked: the group's next member starts there.
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	_, msgs2 := mustSubscribe(t, cfg, topic)
	rest := make([]*message.Message, 5)
	for i := range rest {
		rest[i] = receive(t, msgs2)
		rest[i].Ack()
	}
	want(rest, 5)
}
