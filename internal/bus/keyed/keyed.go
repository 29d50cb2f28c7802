// Package keyed consumes a watermill subscription concurrently across partition keys and in
// order within one key: each message is acked only after its handler returned nil.
//
// The notify tier needs this rather than bus/batch: a delivery may take minutes of retries
// against a receiver that is down, and a batch (or the watermill router on a bus that holds a
// partition's next message until the ack) would hold every other environment's notifications
// behind it. Here one environment waits for its own earlier trigger, so a receiver sees the
// triggers of an environment in order, while the others go on, up to Concurrency messages in
// flight. On Kafka a partition delivers its next message only after the ack, so order per
// partition holds by itself; on the embedded bus a window of messages arrives ahead of acks,
// and the per-key queues keep each environment's order.
package keyed

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cenkalti/backoff/v5"

	"github.com/veritrail/veritrail/internal/retrybackoff"
)

// Handler handles one message. An error means "not done, try again": the consumer retries it
// with backoff until it returns nil or the consumer stops. A message that can never be handled
// must be set aside (logged, stored) by the handler, which then returns nil.
type Handler func(ctx context.Context, msg *message.Message) error

// Config tunes a consumer. Zero fields take the defaults.
type Config struct {
	// Concurrency bounds the messages in flight, across all keys (default 16).
	Concurrency int
	// KeyMetadata is the metadata key of the partition key (default "partition_key").
	KeyMetadata string
	// InitialInterval and MaxInterval shape the waits between retries of a message: doubling
	// from InitialInterval (default 50ms) up to MaxInterval (default 30s), with jitter.
	InitialInterval time.Duration
	MaxInterval     time.Duration
	// NewBackOff, when set, replaces that backoff (tests): one per message.
	NewBackOff func() backoff.BackOff
}

func (c Config) withDefaults() Config {
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.KeyMetadata == "" {
		c.KeyMetadata = "partition_key"
	}
	if c.InitialInterval <= 0 {
		c.InitialInterval = 50 * time.Millisecond
	}
	if c.MaxInterval <= 0 {
		c.MaxInterval = 30 * time.Second
	}
	if c.NewBackOff == nil {
		c.NewBackOff = func() backoff.BackOff { return retrybackoff.New(c.InitialInterval, c.MaxInterval) }
	}
	return c
}

type consumer struct {
	cfg   Config
	h     Handler
	log   *slog.Logger
	slots chan struct{}

	mu sync.Mutex
	// queues holds, per key with a worker, the messages it has yet to finish (the head is the
	// one being handled); a key is present exactly while its worker runs.
	queues map[string][]*message.Message
}

// Consume reads msgs until the channel is closed or ctx ends, then waits for the messages in
// flight: those not done when ctx ends are nacked for the bus to deliver again.
func Consume(ctx context.Context, msgs <-chan *message.Message, cfg Config, h Handler, log *slog.Logger) {
	cfg = cfg.withDefaults()
	c := &consumer{cfg: cfg, h: h, log: log, slots: make(chan struct{}, cfg.Concurrency),
		queues: map[string][]*message.Message{}}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		var m *message.Message
		var ok bool
		select {
		case m, ok = <-msgs:
		case <-ctx.Done():
		}
		if !ok {
			<-c.slots
			return
		}
		key := m.Metadata.Get(cfg.KeyMetadata)
		c.mu.Lock()
		q, busy := c.queues[key]
		c.queues[key] = append(q, m)
		c.mu.Unlock()
		if !busy {
			wg.Go(func() { c.work(ctx, key) })
		}
	}
}

// work handles key's messages in order until its queue is empty.
func (c *consumer) work(ctx context.Context, key string) {
	for {
		c.mu.Lock()
		q := c.queues[key]
		if len(q) == 0 {
			delete(c.queues, key)
			c.mu.Unlock()
			return
		}
		m := q[0]
		c.mu.Unlock()

		c.handle(ctx, m)

		c.mu.Lock()
		c.queues[key] = c.queues[key][1:]
		c.mu.Unlock()
		<-c.slots
	}
}

// handle retries m until the handler is done with it (ack) or the consumer stops (nack).
func (c *consumer) handle(ctx context.Context, m *message.Message) {
	b := c.cfg.NewBackOff()
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			m.Nack()
			return
		}
		err := c.call(ctx, m)
		if err == nil {
			m.Ack()
			return
		}
		if ctx.Err() != nil {
			m.Nack()
			return
		}
		wait := b.NextBackOff()
		c.log.Warn("keyed: message not handled; retrying", "uuid", m.UUID, "attempt", attempt, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// call runs the handler and turns a panic into an error, so one bad message does not stop the
// consumer.
func (c *consumer) call(ctx context.Context, m *message.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return c.h(ctx, m)
}
