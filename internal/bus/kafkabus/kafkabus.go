// Package kafkabus is the Kafka transport of Veritrail's distributed mode:
// `veritrail ingest` publishes evidence messages through NewPublisher and
// `veritrail evaluate` consumes them through NewSubscriber. It wraps
// watermill-kafka (Sarama) with the settings Veritrail relies on:
//
//   - Publish returns once the broker has the message from all in-sync
//     replicas, and the idempotent producer keeps Sarama's internal retries
//     from duplicating or reordering messages.
//   - Messages with the same PartitionKeyMetadata value go to the same
//     partition, so they are consumed in the order they were published.
//   - Subscribers share Config.ConsumerGroup, start from the oldest message
//     when the group has no committed offset yet, and commit only offsets of
//     acked messages, so a restarted subscriber resumes after the last acked
//     message and gets unacked ones again.
//   - Topics are created on first use (see EnsureTopics), so nothing fails on
//     a fresh cluster or on one with automatic topic creation disabled.
//
// Delivery is at-least-once: after a crash or a rebalance a consumer may see
// again messages that were acked less than a second before, so handlers must
// be idempotent.
package kafkabus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
)

// PartitionKeyMetadata is the message metadata key whose value chooses the
// partition: messages with equal values land on the same partition and are
// consumed in publish order. Veritrail uses the trail ID, to keep each
// trail's evidence in order.
//
// A message without it is keyed by its UUID instead: keyless messages spread
// evenly over the partitions (by hash, not round-robin), and a re-publish of
// the same message goes to the same partition as the first attempt.
const PartitionKeyMetadata = "partition_key"

// NewPublisher returns a publisher whose Publish returns once every message
// is acknowledged by all in-sync replicas. Missing topics are created on
// first publish to them.
func NewPublisher(cfg Config, logger watermill.LoggerAdapter) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{
		Brokers:               cfg.Brokers,
		Marshaler:             newMarshaler(),
		OverwriteSaramaConfig: publisherSaramaConfig(cfg),
	}, logger)
	if err != nil {
		return nil, fmt.Errorf("kafkabus: creating publisher: %w", err)
	}
	return &Publisher{Publisher: pub, topics: newTopicEnsurer(cfg), cfg: cfg}, nil
}

// NewSubscriber returns a subscriber in consumer group cfg.ConsumerGroup.
// Acked messages' offsets are committed within a second and when the
// subscriber closes or loses partitions in a rebalance; a nacked message is
// redelivered after a short pause. Missing topics are created on Subscribe.
func NewSubscriber(cfg Config, logger watermill.LoggerAdapter) (message.Subscriber, error) {
	err := cfg.Validate()
	if cfg.ConsumerGroup == "" {
		// Without a group, watermill-kafka reads every partition from the
		// start on each restart and commits nothing.
		err = errors.Join(err, errors.New("kafkabus: no consumer group configured"))
	}
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	if cfg.MaxInFlight > 1 {
		return newWindowSubscriber(cfg, logger), nil
	}
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{
		Brokers:               cfg.Brokers,
		Unmarshaler:           newMarshaler(),
		OverwriteSaramaConfig: subscriberSaramaConfig(cfg),
		ConsumerGroup:         cfg.ConsumerGroup,
	}, logger)
	if err != nil {
		return nil, fmt.Errorf("kafkabus: creating subscriber: %w", err)
	}
	return &subscriber{Subscriber: sub, topics: newTopicEnsurer(cfg)}, nil
}

func newMarshaler() kafka.MarshalerUnmarshaler {
	return kafka.NewWithPartitioningMarshaler(func(_ string, msg *message.Message) (string, error) {
		if key := msg.Metadata.Get(PartitionKeyMetadata); key != "" {
			return key, nil
		}
		// The marshaler always sets a key, and an empty one would hash every
		// keyless message onto one partition.
		return msg.UUID, nil
	})
}

// baseSaramaConfig starts from Sarama's defaults (protocol version 2.8) rather
// than watermill-kafka's, which pin 1.0.0: older than the 2.1 baseline that
// Kafka 4 brokers require (KIP-896).
func baseSaramaConfig(cfg Config) *sarama.Config {
	sc := sarama.NewConfig()
	sc.ClientID = cfg.ClientID
	// Topics are created explicitly with cfg.Partitions; a broker that
	// auto-creates topics would otherwise race us with its own default count.
	sc.Metadata.AllowAutoTopicCreation = false
	return sc
}

func publisherSaramaConfig(cfg Config) *sarama.Config {
	sc := baseSaramaConfig(cfg)
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Return.Successes = true // required by the sync producer
	// The idempotent producer lets retries happen without duplicates or
	// reordering; Sarama requires one in-flight request per broker for it.
	sc.Producer.Idempotent = true
	sc.Net.MaxOpenRequests = 1
	// About 13s of retries with exponential backoff ride out a leader
	// election; past that Publish fails and ingest reports the error.
	sc.Producer.Retry.Max = 10
	sc.Producer.Retry.BackoffFunc = sarama.NewExponentialBackoff(100*time.Millisecond, 2*time.Second)
	sc.Producer.Partitioner = sarama.NewHashPartitioner
	return tuned(cfg, sc)
}

func subscriberSaramaConfig(cfg Config) *sarama.Config {
	sc := baseSaramaConfig(cfg)
	sc.Consumer.Return.Errors = true // watermill-kafka logs them
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	// watermill-kafka marks a message's offset when it is acked; Sarama
	// commits marked offsets every second, when a rebalance takes partitions
	// away and on Close. Committing synchronously per ack instead (auto-commit
	// off) costs a broker round trip per message that queues behind the
	// consumer's long-poll fetch on the same connection: about 5 messages a
	// second against one broker. A crash may thus redeliver up to a second of
	// acked messages, which at-least-once consumers must tolerate anyway.
	sc.Consumer.Offsets.AutoCommit.Enable = true
	sc.Consumer.Offsets.AutoCommit.Interval = time.Second
	sc.Consumer.Group.InstanceId = cfg.InstanceID
	sc.Consumer.Group.Session.Timeout = cfg.SessionTimeout
	sc.Consumer.Group.Heartbeat.Interval = cfg.SessionTimeout / 6
	return tuned(cfg, sc)
}

func tuned(cfg Config, sc *sarama.Config) *sarama.Config {
	if cfg.tuneSarama != nil {
		cfg.tuneSarama(sc)
	}
	return sc
}

// Publisher is a message.Publisher on Kafka (see NewPublisher) that can also tell whether
// the cluster takes publishes (Ping).
type Publisher struct {
	*kafka.Publisher
	topics *topicEnsurer
	cfg    Config
}

// Publish publishes msgs to topic, creating the topic first if it is missing, and returns once
// all in-sync replicas have them.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if err := p.topics.ensure(context.Background(), topic); err != nil {
		return err
	}
	if err := p.Publisher.Publish(topic, msgs...); err != nil {
		return fmt.Errorf("kafkabus: publishing to %s: %w", topic, err)
	}
	return nil
}

// pingTimeout bounds each network step of a Ping (dial, request, answer).
const pingTimeout = 3 * time.Second

// Ping reports whether the cluster takes publishes now: a bootstrap broker answers and, for
// the topics this publisher has published to, every partition has a leader. It opens one
// connection per call and closes it; Sarama's calls take no context, so when ctx ends first
// Ping returns and the call finishes in the background, bounded by pingTimeout.
func (p *Publisher) Ping(ctx context.Context) error {
	topics := p.topics.list()
	done := make(chan error, 1)
	go func() { done <- ping(p.cfg, topics) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("kafkabus: ping: %w", ctx.Err())
	}
}

func ping(cfg Config, topics []string) error {
	sc := tuned(cfg, baseSaramaConfig(cfg))
	sc.Net.DialTimeout, sc.Net.ReadTimeout, sc.Net.WriteTimeout = pingTimeout, pingTimeout, pingTimeout
	var errs []error
	for _, addr := range cfg.Brokers {
		answered, err := pingBroker(sc, addr, topics)
		if answered {
			return err // what the cluster says of the topics; another broker would say the same
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	return fmt.Errorf("kafkabus: no broker answers: %w", errors.Join(errs...))
}

// pingBroker asks one broker for the topics' metadata (or only for its API versions when
// there are no topics yet); answered is whether it answered at all.
func pingBroker(sc *sarama.Config, addr string, topics []string) (answered bool, err error) {
	b := sarama.NewBroker(addr)
	if err := b.Open(sc); err != nil {
		return false, err
	}
	defer func() { _ = b.Close() }()
	if len(topics) == 0 {
		_, err := b.ApiVersions(&sarama.ApiVersionsRequest{})
		return err == nil, err
	}
	resp, err := b.GetMetadata(sarama.NewMetadataRequest(sc.Version, topics))
	if err != nil {
		return false, err
	}
	for _, t := range resp.Topics {
		if !errors.Is(t.Err, sarama.ErrNoError) {
			return true, fmt.Errorf("kafkabus: topic %s: %w", t.Name, t.Err)
		}
		for _, part := range t.Partitions {
			if part.Leader < 0 || errors.Is(part.Err, sarama.ErrLeaderNotAvailable) {
				return true, fmt.Errorf("kafkabus: partition %d of topic %s has no leader", part.ID, t.Name)
			}
		}
	}
	return true, nil
}

type subscriber struct {
	*kafka.Subscriber
	topics *topicEnsurer
}

func (s *subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if err := s.topics.ensure(ctx, topic); err != nil {
		return nil, err
	}
	msgs, err := s.Subscriber.Subscribe(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("kafkabus: subscribing to %s: %w", topic, err)
	}
	return msgs, nil
}

// SubscribeInitialize implements message.SubscribeInitializer by creating the
// topic if it is missing.
func (s *subscriber) SubscribeInitialize(topic string) error {
	return s.topics.ensure(context.Background(), topic)
}

// topicEnsurer remembers which topics exist, so EnsureTopics runs once per
// topic and publisher or subscriber rather than on every call.
type topicEnsurer struct {
	cfg Config

	mu    sync.Mutex
	known map[string]bool
}

func newTopicEnsurer(cfg Config) *topicEnsurer {
	return &topicEnsurer{cfg: cfg, known: make(map[string]bool)}
}

// list returns the topics known to exist, sorted.
func (e *topicEnsurer) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	topics := make([]string, 0, len(e.known))
	for t := range e.known {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	return topics
}

func (e *topicEnsurer) ensure(ctx context.Context, topic string) error {
	// Holding the lock across EnsureTopics makes concurrent first publishes
	// to a topic wait for one creation instead of each trying it.
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.known[topic] {
		return nil
	}
	if err := EnsureTopics(ctx, e.cfg, topic); err != nil {
		return err
	}
	e.known[topic] = true
	return nil
}

// Pinger tells whether the cluster of cfg answers and every partition of topics has a leader,
// as Publisher.Ping does, for a process that only consumes (the notify tier's readiness).
func Pinger(cfg Config, topics ...string) func(ctx context.Context) error {
	cfg = cfg.withDefaults()
	return func(ctx context.Context) error {
		done := make(chan error, 1)
		go func() { done <- ping(cfg, topics) }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return fmt.Errorf("kafkabus: ping: %w", ctx.Err())
		}
	}
}
