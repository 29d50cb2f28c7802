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

	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/bus/kafkabus/kafkatest"
)

// testLogger shows only errors: watermill-kafka logs every subscription and
// rebalance at info level.
func testLogger() watermill.LoggerAdapter {
	return watermill.NewSlogLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// fastRebalance shortens consumer group timings, as watermill-kafka's own
// suite run does. Several suite tests hand a subscriber's messages to nobody
// for a while (e.g. TestTopic reads its second topic only after the first);
// the member holding such a message cannot rejoin the group, so every other
// member waits until the coordinator drops it after the rebalance timeout,
// 60s by default. A consumer that keeps reading all its subscriptions, as a
// watermill router does, never holds its group up this way, so production
// keeps Sarama's defaults.
func fastRebalance(sc *sarama.Config) {
	sc.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	sc.Consumer.Group.Rebalance.Timeout = 3 * time.Second
}

func newPubSub(t *testing.T, brokers []string, group string, maxInFlight int) (message.Publisher, message.Subscriber) {
	t.Helper()
	cfg := kafkabus.WithSaramaTuning(kafkabus.Config{Brokers: brokers, ConsumerGroup: group, MaxInFlight: maxInFlight}, fastRebalance)
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

// TestPubSubSuite runs watermill's universal Pub/Sub tests twice: with
// keyless messages, and with every message keyed by its payload, which is
// how the suite's order test groups messages (order holds per key only).
//
// ForceShort, the suite's own knob, cuts its message counts (e.g. 5000 to 50
// messages in TestContinueAfterSubscribeClose, 10000 to 100 in
// TestPublisherClose, 5000 messages and 50 subscribers to 100 and 10 in
// TestConcurrentSubscribe, 3x100 nacks to 1x5 in TestContinueAfterErrors).
// With the full counts the two runs take about 50s here, and over 100s with
// -race, mostly waiting for group rebalances.
func TestPubSubSuite(t *testing.T) {
	testPubSubSuite(t, 1, nil)
}

// TestPubSubSuiteWindow runs the universal tests on the window subscriber (MaxInFlight above 1),
// as the evaluate tier consumes. TestNoAck is left out: it checks that nothing more arrives
// before an ack, which is what a window gives up on purpose (TestWindow covers the window's own
// contract).
func TestPubSubSuiteWindow(t *testing.T) {
	testPubSubSuite(t, 8, map[string]func(*testing.T, tests.TestContext, tests.PubSubConstructor){
		"TestPublishSubscribe":                  tests.TestPublishSubscribe,
		"TestConcurrentSubscribe":               tests.TestConcurrentSubscribe,
		"TestConcurrentSubscribeMultipleTopics": tests.TestConcurrentSubscribeMultipleTopics,
		"TestResendOnError":                     tests.TestResendOnError,
		"TestContinueAfterSubscribeClose":       tests.TestContinueAfterSubscribeClose,
		"TestConcurrentClose":                   tests.TestConcurrentClose,
		"TestContinueAfterErrors":               tests.TestContinueAfterErrors,
		"TestPublishSubscribeInOrder":           tests.TestPublishSubscribeInOrder,
		"TestPublisherClose":                    tests.TestPublisherClose,
		"TestTopic":                             tests.TestTopic,
		"TestMessageCtx":                        tests.TestMessageCtx,
		"TestSubscribeCtx":                      tests.TestSubscribeCtx,
		"TestNewSubscriberReceivesOldMessages":  tests.TestNewSubscriberReceivesOldMessages,
	})
}

// testPubSubSuite runs the whole universal suite, or the tests of only (and TestConsumerGroups).
func testPubSubSuite(t *testing.T, maxInFlight int, only map[string]func(*testing.T, tests.TestContext, tests.PubSubConstructor)) {
	brokers := kafkatest.NewCluster(t, kafkabus.DefaultPartitions)

	// The subscribers of one suite test share a consumer group, as evaluate
	// processes do; a group per test keeps one test's rebalances from
	// stalling the others.
	features := tests.Features{
		ConsumerGroups: true,
		// At-least-once: a message acked but not yet committed when its
		// subscriber stops or loses the partition is delivered again.
		ExactlyOnceDelivery: false,
		Persistent:          true,
		// Subscribers of a group split the messages between them.
		NewSubscriberReceivesOldMessages: false,
		ForceShort:                       true,
	}

	t.Run("keyless", func(t *testing.T) {
		t.Parallel()
		features := features
		// Keyless messages spread over partitions, consumed concurrently.
		features.GuaranteedOrder = false
		withGroup := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
			return newPubSub(t, brokers, group, maxInFlight)
		}
		runSuite(t, features, withGroup, only)
	})

	t.Run("keyed", func(t *testing.T) {
		t.Parallel()
		features := features
		features.GuaranteedOrder = true
		keyByPayload := message.MessageTransformPublisherDecorator(func(msg *message.Message) {
			msg.Metadata.Set(kafkabus.PartitionKeyMetadata, string(msg.Payload))
		})
		withGroup := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
			pub, sub := newPubSub(t, brokers, group, maxInFlight)
			pub, err := keyByPayload(pub)
			if err != nil {
				t.Fatal(err)
			}
			return pub, sub
		}
		runSuite(t, features, withGroup, only)
	})
}

// runSuite runs watermill's universal tests, all of them or those of only, each test's
// subscribers in a consumer group of its own.
func runSuite(t *testing.T, features tests.Features, withGroup tests.ConsumerGroupPubSubConstructor,
	only map[string]func(*testing.T, tests.TestContext, tests.PubSubConstructor)) {
	ownGroup := func(t *testing.T) (message.Publisher, message.Subscriber) { return withGroup(t, "suite-"+t.Name()) }
	if only == nil {
		tests.TestPubSub(t, features, ownGroup, withGroup)
		return
	}
	for name, test := range only {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, tests.TestContext{TestID: tests.NewTestID(), Features: features}, ownGroup)
		})
	}
	t.Run("TestConsumerGroups", func(t *testing.T) {
		t.Parallel()
		tests.TestConsumerGroups(t, tests.TestContext{TestID: tests.NewTestID(), Features: features}, withGroup)
	})
}
