package kafkabus_test

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/veritrail/veritrail/bus/kafkabus"
	"github.com/veritrail/veritrail/bus/kafkabus/kafkatest"
)

// testLogger shows only errors: watermill-kafka logs every subscribe and
// rebalance at info level, which would drown the test output.
func testLogger() watermill.LoggerAdapter {
	return watermill.NewSlogLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// fastRebalance shortens group timings, as watermill-kafka's own suite run
// does. Several suite tests read a subscriber's topics one after another; a
// member whose message nobody reads cannot leave its session, and the group
// cannot rebalance until the coordinator drops it after the rebalance
// timeout (Sarama's default: 60s).
func fastRebalance(sc *sarama.Config) {
	sc.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	sc.Consumer.Group.Rebalance.Timeout = 3 * time.Second
}

func newPubSub(t *testing.T, brokers []string, group string) (message.Publisher, message.Subscriber) {
	t.Helper()
	cfg := kafkabus.WithSaramaTuning(kafkabus.Config{Brokers: brokers, ConsumerGroup: group}, fastRebalance)
	pub, err := kafkabus.NewPublisher(cfg, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	sub, err := kafkabus.NewSubscriber(cfg, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	return pub, sub
}

// The suite's own knob ForceShort cuts its message counts (5000 to 50 in
// TestContinueAfterSubscribeClose, 10000 to 100 in TestPublisherClose, ...):
// with a synchronous offset commit per ack the full counts take minutes.
func TestPubSubSuite(t *testing.T) {
	brokers := kafkatest.NewCluster(t, 12)

	// Subscribers made for one suite test share a consumer group, as
	// evaluate processes do; separate groups per test keep one test's
	// rebalances from stalling the others.
	pubSub := func(t *testing.T) (message.Publisher, message.Subscriber) {
		return newPubSub(t, brokers, "suite-"+t.Name())
	}
	withGroup := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		return newPubSub(t, brokers, group)
	}

	t.Run("keyless", func(t *testing.T) {
		t.Parallel()
		tests.TestPubSub(t, tests.Features{
			ConsumerGroups: true,
			// At-least-once: a message acked but not yet committed when a
			// subscriber stops or loses its partition is delivered again.
			ExactlyOnceDelivery: false,
			// Keyless messages spread over partitions, which are consumed
			// concurrently.
			GuaranteedOrder: false,
			Persistent:      true,
			// Subscribers of one group split the messages between them.
			NewSubscriberReceivesOldMessages: false,
			ForceShort:                       false,
		}, pubSub, withGroup)
	})

	// Order is guaranteed per partition key. The suite's order test groups
	// messages by payload, so this run keys every message by its payload.
	t.Run("keyed", func(t *testing.T) {
		t.Parallel()
		keyByPayload := message.MessageTransformPublisherDecorator(func(msg *message.Message) {
			msg.Metadata.Set(kafkabus.PartitionKeyMetadata, string(msg.Payload))
		})
		keyed := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
			pub, sub := newPubSub(t, brokers, group)
			pub, err := keyByPayload(pub)
			if err != nil {
				t.Fatal(err)
			}
			return pub, sub
		}
		tests.TestPubSub(t, tests.Features{
			ConsumerGroups:                   true,
			ExactlyOnceDelivery:              false,
			GuaranteedOrder:                  true,
			Persistent:                       true,
			NewSubscriberReceivesOldMessages: false,
			ForceShort:                       true,
		}, func(t *testing.T) (message.Publisher, message.Subscriber) {
			return keyed(t, "suite-"+t.Name())
		}, keyed)
	})
}
