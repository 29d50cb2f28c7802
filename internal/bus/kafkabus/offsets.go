package kafkabus

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/IBM/sarama"
)

// Offsets tells where the partitions of a topic end.
type Offsets struct {
	client sarama.Client
}

// NewOffsets connects to the cluster of cfg.
func NewOffsets(cfg Config) (*Offsets, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	client, err := sarama.NewClient(cfg.Brokers, tuned(cfg, baseSaramaConfig(cfg)))
	if err != nil {
		return nil, fmt.Errorf("kafkabus: connecting to %v: %w", cfg.Brokers, err)
	}
	return &Offsets{client: client}, nil
}

// Close releases the connections.
func (o *Offsets) Close() error { return o.client.Close() }

// End returns, for each partition of topic, the offset its next message will get: every message
// acknowledged to a publisher (acks=all) lies below it. It sends one ListOffsets request to each
// partition leader, at once, and asks again once after refreshing the metadata when a leader
// moved. Sarama's calls take no context: when ctx ends first, End returns its error and the
// requests finish in the background, bounded by Sarama's timeouts.
func (o *Offsets) End(ctx context.Context, topic string) (map[int32]int64, error) {
	type result struct {
		ends map[int32]int64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		ends, err := o.end(topic)
		if err != nil {
			if rerr := o.client.RefreshMetadata(topic); rerr == nil {
				ends, err = o.end(topic)
			}
		}
		done <- result{ends, err}
	}()
	select {
	case r := <-done:
		return r.ends, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("kafkabus: end offsets of %s: %w", topic, ctx.Err())
	}
}

func (o *Offsets) end(topic string) (map[int32]int64, error) {
	parts, err := o.client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("kafkabus: partitions of %s: %w", topic, err)
	}
	byLeader := map[*sarama.Broker][]int32{}
	for _, p := range parts {
		b, err := o.client.Leader(topic, p)
		if err != nil {
			return nil, fmt.Errorf("kafkabus: leader of %s/%d: %w", topic, p, err)
		}
		byLeader[b] = append(byLeader[b], p)
	}
	var (
		mu   sync.Mutex
		ends = make(map[int32]int64, len(parts))
		errs []error
		wg   sync.WaitGroup
	)
	version := o.client.Config().Version
	for b, ps := range byLeader {
		wg.Go(func() {
			req := sarama.NewOffsetRequest(version)
			for _, p := range ps {
				req.AddBlock(topic, p, sarama.OffsetNewest, 1)
			}
			resp, err := b.GetAvailableOffsets(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("kafkabus: end offsets of %s from broker %d: %w", topic, b.ID(), err))
				return
			}
			for _, p := range ps {
				block := resp.GetBlock(topic, p)
				switch {
				case block == nil:
					errs = append(errs, fmt.Errorf("kafkabus: end offset of %s/%d: %w", topic, p, sarama.ErrIncompleteResponse))
				case !errors.Is(block.Err, sarama.ErrNoError):
					errs = append(errs, fmt.Errorf("kafkabus: end offset of %s/%d: %w", topic, p, block.Err))
				case len(block.Offsets) == 1:
					ends[p] = block.Offsets[0]
				default:
					ends[p] = block.Offset
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ends, nil
}
