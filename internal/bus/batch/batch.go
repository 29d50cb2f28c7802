// Package batch consumes a watermill subscription in batches: it hands the
// messages that are ready together to one handler call, acks the ones the
// handler finished and retries or nacks the rest.
//
// The watermill router handles one message per call, and a bus keeps the
// next message of a partition until the previous one is acked, so a consumer
// that wants to apply many messages in one store transaction needs both a
// bus that delivers ahead of acks (sqlitebus MaxInFlight; on Kafka, every
// partition has one message in flight) and a consumer that reads them from
// one goroutine in order, which is this one.
package batch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cenkalti/backoff/v5"

	"github.com/veritrail/veritrail/internal/retrybackoff"
)

// Handler applies msgs in order and returns how many of them, from the
// first, are done. When it returns an error, msgs[done] failed and the
// messages after it were not applied.
type Handler func(ctx context.Context, msgs []*message.Message) (done int, err error)

// Config tunes a consumer. Zero fields take the defaults.
type Config struct {
	// MaxBatch bounds the messages of one handler call (default 64).
	MaxBatch int
	// Linger is how long a batch that has begun waits for each next message
	// (default 200µs). Under load messages are already waiting; alone, a
	// message is delayed by at most this much.
	Linger time.Duration
	// Window, when set, keeps a batch that has begun open for more messages until Window after
	// its first one (or MaxBatch), however far apart they come, instead of closing it after
	// Linger without one: fewer, larger handler calls when each costs round trips of its own
	// (a PostgreSQL transaction), for up to Window of added delay.
	Window time.Duration
	// MaxRetries is how often the unfinished rest of a batch is retried in
	// place, with a jittered backoff doubling from InitialInterval (default
	// 50ms) up to MaxInterval (default 2s), before it is nacked for the bus
	// to deliver again (default 5).
	MaxRetries      int
	InitialInterval time.Duration
	MaxInterval     time.Duration
	// NewBackOff, when set, replaces that backoff (tests): one per batch.
	NewBackOff func() backoff.BackOff
}

func (c Config) withDefaults() Config {
	if c.MaxBatch <= 0 {
		c.MaxBatch = 64
	}
	if c.Linger <= 0 {
		c.Linger = 200 * time.Microsecond
	}
	if c.MaxRetries <= 0 {
		c.MaxRetries = 5
	}
	if c.InitialInterval <= 0 {
		c.InitialInterval = 50 * time.Millisecond
	}
	if c.MaxInterval <= 0 {
		c.MaxInterval = 2 * time.Second
	}
	if c.NewBackOff == nil {
		c.NewBackOff = func() backoff.BackOff { return retrybackoff.New(c.InitialInterval, c.MaxInterval) }
	}
	return c
}

// Consume reads msgs until the channel is closed or ctx ends, calling h
// with batches in the order the messages arrive.
func Consume(ctx context.Context, msgs <-chan *message.Message, cfg Config, h Handler, log *slog.Logger) {
	cfg = cfg.withDefaults()
	linger := time.NewTimer(cfg.Linger)
	defer linger.Stop()
	batch := make([]*message.Message, 0, cfg.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case m, ok := <-msgs:
			if !ok {
				return
			}
			batch = append(batch, m)
		case <-ctx.Done():
			return
		}
		var closes time.Time // when the batch closes, with a Window
		if cfg.Window > 0 {
			closes = time.Now().Add(cfg.Window)
		}
		open := true
	collect:
		for len(batch) < cfg.MaxBatch {
			select { // what is ready now, without a timer
			case m, ok := <-msgs:
				if !ok {
					open = false
					break collect
				}
				batch = append(batch, m)
				continue
			default:
			}
			wait := cfg.Linger
			if !closes.IsZero() {
				if wait = time.Until(closes); wait <= 0 {
					break collect
				}
			}
			linger.Reset(wait)
			select {
			case m, ok := <-msgs:
				if !ok {
					open = false
					break collect
				}
				batch = append(batch, m)
			case <-linger.C:
				break collect
			case <-ctx.Done():
				break collect
			}
		}
		process(ctx, batch, cfg, h, log)
		if !open {
			return
		}
	}
}

// process runs h over batch until every message is acked, or nacks the rest
// when the retries are spent or ctx ends.
func process(ctx context.Context, batch []*message.Message, cfg Config, h Handler, log *slog.Logger) {
	b := cfg.NewBackOff()
	for attempt := 0; ; attempt++ {
		done, err := call(ctx, h, batch)
		done = min(max(done, 0), len(batch))
		for _, m := range batch[:done] {
			m.Ack()
		}
		batch = batch[done:]
		if err == nil && len(batch) == 0 {
			return
		}
		if err == nil { // a handler that stops early without saying why is retried like a failure
			err = fmt.Errorf("handler finished %d of %d messages", done, done+len(batch))
		}
		if ctx.Err() != nil { // stopping: the bus delivers them again to the next consumer
			log.Info("batch: stopping; unfinished messages go back to the bus", "messages", len(batch), "first", batch[0].UUID)
			for _, m := range batch {
				m.Nack()
			}
			return
		}
		if attempt >= cfg.MaxRetries {
			log.Error("batch: handing messages back to the bus", "messages", len(batch), "first", batch[0].UUID, "err", err)
			for _, m := range batch {
				m.Nack()
			}
			return
		}
		wait := b.NextBackOff()
		log.Warn("batch: retrying", "messages", len(batch), "first", batch[0].UUID, "attempt", attempt+1, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// call runs h and turns a panic into an error, so that one bad message does
// not stop the consumer.
func call(ctx context.Context, h Handler, batch []*message.Message) (done int, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return h(ctx, batch)
}
