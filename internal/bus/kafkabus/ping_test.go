package kafkabus_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/bus/kafkabus/kafkatest"
)

// TestPublisherPing: a publisher's Ping passes while its broker answers, fails while the
// broker is down, passes again once it is back, and the publisher publishes again then.
func TestPublisherPing(t *testing.T) {
	ctx := context.Background()
	cluster := kafkatest.NewRestartable(t, 2)
	cfg := kafkabus.Config{Brokers: cluster.Addrs(), Partitions: 2}
	pub, err := kafkabus.NewPublisher(cfg, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	if err := pub.Ping(ctx); err != nil {
		t.Fatalf("Ping before any publish: %v", err)
	}
	if err := pub.Publish("ping-topic", message.NewMessage("m1", []byte("one"))); err != nil {
		t.Fatal(err)
	}
	if err := pub.Ping(ctx); err != nil {
		t.Fatalf("Ping of a topic with leaders: %v", err)
	}

	cluster.Stop()
	if err := pub.Ping(ctx); err == nil {
		t.Fatal("Ping passed while the broker is down")
	}
	cluster.Start()
	if err := pub.Ping(ctx); err != nil {
		t.Fatalf("Ping once the broker is back: %v", err)
	}
	if err := pub.Publish("ping-topic", message.NewMessage("m2", []byte("two"))); err != nil {
		t.Fatalf("publish once the broker is back: %v", err)
	}
	_, msgs := mustSubscribe(t, kafkabus.Config{Brokers: cluster.Addrs(), Partitions: 2, ConsumerGroup: "ping"}, "ping-topic")
	got := map[string]bool{}
	for range 2 {
		m := receive(t, msgs)
		got[m.UUID] = true
		m.Ack()
	}
	if !got["m1"] || !got["m2"] {
		t.Fatalf("received %v, want m1 (from before the restart) and m2", got)
	}
}

// TestPublisherPingLeaderless: while a partition of a topic the publisher uses has no leader
// (the broker answers, but a publish to that partition cannot succeed), Ping fails naming it.
func TestPublisherPingLeaderless(t *testing.T) {
	ctx := context.Background()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	var leaderless atomic.Bool
	cluster.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		req := kreq.(*kmsg.MetadataRequest)
		if !leaderless.Load() || len(req.Topics) != 1 {
			return nil, nil, false
		}
		host, port, _ := net.SplitHostPort(cluster.ListenAddrs()[0])
		p, _ := strconv.Atoi(port)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.SetVersion(req.GetVersion())
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, host, int32(p)
		resp.Brokers = append(resp.Brokers, b)
		topic := kmsg.NewMetadataResponseTopic()
		topic.Topic = req.Topics[0].Topic
		for i := range int32(2) {
			part := kmsg.NewMetadataResponseTopicPartition()
			part.Partition, part.Leader = i, 0
			if i == 1 {
				part.Leader, part.ErrorCode = -1, 5 // LEADER_NOT_AVAILABLE
			}
			topic.Partitions = append(topic.Partitions, part)
		}
		resp.Topics = append(resp.Topics, topic)
		return resp, nil, true
	})
	pub, err := kafkabus.NewPublisher(kafkabus.Config{Brokers: cluster.ListenAddrs(), Partitions: 2}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	if err := pub.Publish("lead-topic", message.NewMessage("m1", []byte("one"))); err != nil {
		t.Fatal(err)
	}
	if err := pub.Ping(ctx); err != nil {
		t.Fatalf("Ping with every leader: %v", err)
	}
	leaderless.Store(true)
	if err := pub.Ping(ctx); err == nil || !strings.Contains(err.Error(), "partition 1 of topic lead-topic has no leader") {
		t.Fatalf("Ping with a leaderless partition: %v", err)
	}
	leaderless.Store(false)
	if err := pub.Ping(ctx); err != nil {
		t.Fatalf("Ping once the partition has a leader again: %v", err)
	}
}
