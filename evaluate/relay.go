package evaluate

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cenkalti/backoff/v5"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/retrybackoff"
	"github.com/veritrail/veritrail/internal/store"
)

// RelayConfig tunes the outbox relay. Zero fields take the defaults.
type RelayConfig struct {
	// Poll is how often the outbox is read without being woken: it finds triggers written by
	// another process (or straight through the store) and those a crash left behind
	// (default 200ms).
	Poll time.Duration
	// Batch bounds the triggers of one publish (default 256).
	Batch int
	// Retention is how long sent triggers stay in the outbox (default 24h).
	Retention time.Duration
}

func (c RelayConfig) withDefaults() RelayConfig {
	if c.Poll <= 0 {
		c.Poll = 200 * time.Millisecond
	}
	if c.Batch <= 0 {
		c.Batch = 256
	}
	if c.Retention <= 0 {
		c.Retention = 24 * time.Hour
	}
	return c
}

// Relay publishes the trigger outbox to contract.TopicTriggers: every trigger the evaluator
// committed reaches the bus at least once, in outbox order, keyed by its environment. A trigger
// published twice (a crash between publish and the sent mark) carries the same ID, which the
// notify tier's delivery log deduplicates.
type Relay struct {
	cfg    RelayConfig
	outbox store.TriggerOutbox
	pub    message.Publisher
	log    *slog.Logger
	wake   chan struct{}
	now    func() time.Time
	// retry paces reads after a failure: from Poll up to 10s, jittered so that evaluators
	// failing together (the store or the bus restarting) do not retry in step.
	retry backoff.BackOff
}

// NewRelay builds a relay; Run starts it.
func NewRelay(cfg RelayConfig, outbox store.TriggerOutbox, pub message.Publisher, log *slog.Logger) *Relay {
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.withDefaults()
	return &Relay{cfg: cfg, outbox: outbox, pub: pub, log: log, wake: make(chan struct{}, 1), now: time.Now,
		retry: retrybackoff.New(cfg.Poll, 10*time.Second)}
}

// Wake makes the relay read the outbox now rather than at its next poll. It never blocks: the
// evaluator calls it after each commit.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run relays until ctx ends. Failures (the store or the bus unreachable) are logged and
// retried with a growing pause: the triggers stay in the outbox meanwhile.
func (r *Relay) Run(ctx context.Context) error {
	poll := time.NewTimer(r.cfg.Poll)
	defer poll.Stop()
	pause := r.cfg.Poll
	lastPrune := time.Time{}
	for {
		n, err := r.outbox.RelayTriggers(ctx, r.cfg.Batch, r.publish)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			pause = r.retry.NextBackOff()
			r.log.Warn("evaluate: relaying notification triggers failed; they stay in the outbox", "retry_in", pause, "err", err)
		case n == r.cfg.Batch:
			r.retry.Reset()
			continue // more are waiting
		default:
			r.retry.Reset()
			pause = r.cfg.Poll
		}
		if now := r.now(); now.Sub(lastPrune) > time.Hour {
			lastPrune = now
			if _, err := r.outbox.PruneTriggers(ctx, float64(now.Add(-r.cfg.Retention).UnixMicro())/1e6); err != nil {
				r.log.Warn("evaluate: pruning sent notification triggers failed", "err", err)
			}
		}
		poll.Reset(pause)
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-poll.C:
		}
	}
}

func (r *Relay) publish(_ context.Context, triggers []store.Trigger) error {
	msgs := make([]*message.Message, len(triggers))
	for i, t := range triggers {
		m := message.NewMessage(t.ID, message.Payload(t.Payload))
		for k, v := range t.Metadata { // the trace context of the change the trigger derives from
			m.Metadata.Set(k, v)
		}
		m.Metadata.Set(contract.MetaPartitionKey, contract.EnvironmentKey(t.OrgID, t.EnvID))
		m.Metadata.Set(contract.MetaOrg, t.OrgID)
		m.Metadata.Set(contract.MetaSchema, fmt.Sprint(contract.TriggerSchemaVersion))
		msgs[i] = m
	}
	if err := r.pub.Publish(contract.TopicTriggers, msgs...); err != nil {
		return fmt.Errorf("publish %d triggers: %w", len(msgs), err)
	}
	return nil
}
