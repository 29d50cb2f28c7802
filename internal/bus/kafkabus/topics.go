package kafkabus

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// EnsureTopics creates those of topics that do not exist yet, with
// cfg.Partitions partitions and cfg.ReplicationFactor replicas. Existing
// topics are left as they are, even with another partition count: adding
// partitions would move keys to other partitions and break per-key order.
//
// Sarama's admin calls take no context, so when ctx ends first EnsureTopics
// returns ctx's error and the calls finish in the background, bounded by
// Sarama's own timeouts.
func EnsureTopics(ctx context.Context, cfg Config, topics ...string) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	if len(topics) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafkabus: ensuring topics %v: %w", topics, err)
	}
	done := make(chan error, 1)
	go func() { done <- ensureTopics(cfg, topics) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("kafkabus: ensuring topics %v: %w", topics, ctx.Err())
	}
}

func ensureTopics(cfg Config, topics []string) (err error) {
	admin, err := sarama.NewClusterAdmin(cfg.Brokers, tuned(cfg, baseSaramaConfig(cfg)))
	if err != nil {
		return fmt.Errorf("kafkabus: connecting to %v: %w", cfg.Brokers, err)
	}
	defer func() {
		if cerr := admin.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("kafkabus: closing cluster admin: %w", cerr))
		}
	}()

	existing, err := admin.ListTopics()
	if err != nil {
		return fmt.Errorf("kafkabus: listing topics: %w", err)
	}
	detail := &sarama.TopicDetail{NumPartitions: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor}
	for _, topic := range topics {
		if _, ok := existing[topic]; ok {
			continue
		}
		// Another process may create the topic between our list and create.
		if err := admin.CreateTopic(topic, detail, false); err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			return fmt.Errorf("kafkabus: creating topic %s: %w", topic, err)
		}
	}
	return nil
}
