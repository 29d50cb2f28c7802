package sqlitebus

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
)

// suiteBuses gives every test of the universal suite its own database file.
// The suite calls the constructor many times per test (restarted
// subscribers, multiplied subscribers) and expects all those instances to
// share state, so the Bus is keyed by the test.
type suiteBuses struct {
	mu          sync.Mutex
	buses       map[*testing.T]*Bus
	maxInFlight int
	journal     bool
}

func (s *suiteBuses) get(t *testing.T) *Bus {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.buses[t]; ok {
		return b
	}
	b := newTestBusWith(t, filepath.Join(t.TempDir(), "bus.db"),
		Config{NackResendSleep: time.Millisecond, CompactInterval: -1, MaxInFlight: s.maxInFlight, PublishJournal: s.journal})
	s.buses[t] = b
	return b
}

// newTestBus opens path and returns a Bus with a short NackResendSleep, so
// that tests which nack hundreds of times stay fast. The Bus and the database
// are closed when the test ends.
func newTestBus(t testing.TB, path string) *Bus {
	t.Helper()
	return newTestBusWith(t, path, Config{NackResendSleep: time.Millisecond, CompactInterval: -1})
}

func newTestBusWith(t testing.TB, path string, cfg Config) *Bus {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(db, cfg, watermill.NewStdLogger(false, false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

func (s *suiteBuses) pubSub(t *testing.T, group string) (message.Publisher, message.Subscriber) {
	b := s.get(t)
	pub, err := b.Publisher()
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.Subscriber(group)
	if err != nil {
		t.Fatal(err)
	}
	return pub, sub
}

// TestPubSubIndependent runs the universal suite with independent
// (empty-group) subscribers as the default, and named groups for the
// consumer group test.
func TestPubSubIndependent(t *testing.T) {
	s := &suiteBuses{buses: make(map[*testing.T]*Bus)}
	tests.TestPubSub(t, tests.Features{
		ConsumerGroups:      true,
		ExactlyOnceDelivery: false,
		GuaranteedOrder:     true,
		// Every independent subscriber reads the whole topic in order;
		// several of them merged into one channel are not one ordered
		// stream.
		GuaranteedOrderWithSingleSubscriber: true,
		Persistent:                          true,
		NewSubscriberReceivesOldMessages:    true,
	},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return s.pubSub(t, "") },
		s.pubSub,
	)
}

// TestPubSubConsumerGroup runs the universal suite with every default
// subscriber in one consumer group, which is how Veritrail consumes: it
// exercises resuming from stored offsets and competing subscribers.
func TestPubSubConsumerGroup(t *testing.T) {
	for name, journal := range map[string]bool{"table": false, "journal": true} {
		t.Run(name, func(t *testing.T) { testPubSubConsumerGroup(t, journal) })
	}
}

// testPubSubConsumerGroup is TestPubSubConsumerGroup with publishes going
// to the table directly or through the publish journal.
func testPubSubConsumerGroup(t *testing.T, journal bool) {
	s := &suiteBuses{buses: make(map[*testing.T]*Bus), journal: journal}
	tests.TestPubSub(t, tests.Features{
		ConsumerGroups:      true,
		ExactlyOnceDelivery: false,
		GuaranteedOrder:     true,
		// One message of a group is in flight at a time, so the order
		// holds across competing subscribers too.
		GuaranteedOrderWithSingleSubscriber: false,
		Persistent:                          true,
		// A group resumes where it stopped; it does not re-read.
		NewSubscriberReceivesOldMessages: false,
	},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return s.pubSub(t, "default") },
		s.pubSub,
	)
}

// TestPubSubConsumerGroupWindow runs the universal tests on a consumer group
// with a window of messages in flight and the publish journal, as the
// embedded mode publishes and the evaluator consumes. TestNoAck is
// left out: it checks that nothing more arrives before an ack, which is what
// a window gives up on purpose (TestWindow covers the window's own contract).
func TestPubSubConsumerGroupWindow(t *testing.T) {
	s := &suiteBuses{buses: make(map[*testing.T]*Bus), maxInFlight: 8, journal: true}
	features := tests.Features{
		ConsumerGroups:      true,
		GuaranteedOrder:     true,
		Persistent:          true,
		ExactlyOnceDelivery: false,
	}
	group := func(t *testing.T) (message.Publisher, message.Subscriber) { return s.pubSub(t, "default") }
	for name, test := range map[string]func(*testing.T, tests.TestContext, tests.PubSubConstructor){
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
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, tests.TestContext{TestID: tests.NewTestID(), Features: features}, group)
		})
	}
	t.Run("TestConsumerGroups", func(t *testing.T) {
		t.Parallel()
		tests.TestConsumerGroups(t, tests.TestContext{TestID: tests.NewTestID(), Features: features}, s.pubSub)
	})
}
