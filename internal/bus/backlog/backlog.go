// Package backlog holds publishers back while the consumers of a topic are too far behind them.
//
// In the distributed mode ingest accepts evidence faster than one evaluator applies it (on two
// cores about twice as fast). Without a bound the difference piles up on the bus for as long as
// the load lasts, and so does every read-your-writes wait behind it. The embedded bus bounds its
// own consumer (sqlitebus Config.MaxLag); with Kafka the consumers are other processes, so the
// bound is measured: the topic's end offsets (where the broker's log ends) minus the positions
// the consumers recorded in the store (what they applied), summed over the partitions. This is
// the backlog of every ingest process together, not only of this one, so several ingest
// processes share one bound.
package backlog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// Defaults of Config.
const (
	// DefaultMax is 32 of the evaluator's 64-message batches: enough that every partition's
	// window stays full, little enough that one evaluator (about 5,000 applied a second on two
	// cores) drains it in well under a second after the load stops.
	DefaultMax     = 2048
	DefaultMaxWait = time.Second
	DefaultPoll    = 25 * time.Millisecond
)

// Offsets answers, per partition, a topic's log end or its consumers' recorded position.
type Offsets func(ctx context.Context) (map[int32]int64, error)

// Config configures a Publisher.
type Config struct {
	// Topic is the one topic held back; publishes to others pass.
	Topic string
	// Ends answers where the topic's partitions end; Positions where its consumers are.
	Ends, Positions Offsets
	// Max is how many messages the consumers may be behind before a publish waits.
	Max int64
	// MaxWait is how long one Publish waits at most: consumers that are stuck (or gone) slow
	// publishers down to a trickle, they do not stop them, since the evidence is durable on the
	// bus whether or not it is applied yet.
	MaxWait time.Duration
	// Poll is how often the backlog is measured while publishes come.
	Poll time.Duration
	Log  *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Max <= 0 {
		c.Max = DefaultMax
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return c
}

// Publisher is a message.Publisher that waits, before publishing to Config.Topic, while the
// backlog is over Config.Max. Run measures the backlog.
type Publisher struct {
	next message.Publisher
	cfg  Config

	mu        sync.Mutex
	measured  int64         // backlog at the last measurement
	published int64         // messages published here since start
	counted   int64         // published when the last measurement started
	active    time.Time     // the last publish; the backlog is measured while it is recent
	wake      chan struct{} // closed and replaced when a publish comes while Run sleeps
	changed   chan struct{} // closed and replaced by every measurement
	lastWarn  time.Time     // the last time a publish went ahead without waiting enough
}

// New wraps next.
func New(next message.Publisher, cfg Config) *Publisher {
	return &Publisher{next: next, cfg: cfg.withDefaults(), wake: make(chan struct{}), changed: make(chan struct{})}
}

// estimate is the backlog now: the last measurement plus what was published here since it started.
// The caller holds p.mu.
func (p *Publisher) estimate() int64 { return p.measured + p.published - p.counted }

// Backlog is the current estimate of how many messages the consumers are behind.
func (p *Publisher) Backlog() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.estimate()
}

// Publish waits (up to Config.MaxWait) while the backlog is over Config.Max, then publishes.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if topic == p.cfg.Topic {
		p.admit(int64(len(msgs)))
	}
	return p.next.Publish(topic, msgs...)
}

// Close closes the wrapped publisher.
func (p *Publisher) Close() error { return p.next.Close() }

// admit counts n messages about to be published, first waiting while the backlog is too long.
func (p *Publisher) admit(n int64) {
	var deadline <-chan time.Time
	p.mu.Lock()
	p.active = time.Now()
	close(p.wake)
	p.wake = make(chan struct{})
	for p.estimate() > p.cfg.Max {
		if deadline == nil {
			t := time.NewTimer(p.cfg.MaxWait)
			defer t.Stop()
			deadline = t.C
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
			p.mu.Lock()
			continue
		case <-deadline:
		}
		p.mu.Lock()
		if now := time.Now(); now.Sub(p.lastWarn) > 10*time.Second {
			p.lastWarn = now
			p.cfg.Log.Warn("backlog: the consumers stay behind; publishing anyway", "topic", p.cfg.Topic,
				"backlog", p.estimate(), "max", p.cfg.Max, "waited", p.cfg.MaxWait)
		}
		break
	}
	p.published += n
	p.mu.Unlock()
}

// Run measures the backlog every Config.Poll while publishes come (one came within the last
// second), and sleeps otherwise, until ctx ends. A measurement that fails counts as no backlog:
// publishers are held back only on evidence that the consumers are behind.
func (p *Publisher) Run(ctx context.Context) {
	t := time.NewTicker(p.cfg.Poll)
	defer t.Stop()
	var lastErr time.Time
	for {
		p.mu.Lock()
		idle := time.Since(p.active) > time.Second
		wake := p.wake
		p.mu.Unlock()
		if idle {
			select {
			case <-ctx.Done():
				return
			case <-wake:
			}
		}
		p.mu.Lock()
		counted := p.published
		p.mu.Unlock()
		backlog, err := p.measure(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if time.Since(lastErr) > 10*time.Second {
				lastErr = time.Now()
				p.cfg.Log.Warn("backlog: cannot measure; publishes are not held back", "topic", p.cfg.Topic, "err", err)
			}
			backlog = 0
		}
		p.mu.Lock()
		p.measured, p.counted = backlog, counted
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// measure sums, over the topic's partitions, how far the recorded positions are behind the ends.
// The positions are read first: a message applied between the two reads then counts as behind,
// never the other way round.
func (p *Publisher) measure(ctx context.Context) (int64, error) {
	pos, err := p.cfg.Positions(ctx)
	if err != nil {
		return 0, err
	}
	ends, err := p.cfg.Ends(ctx)
	if err != nil {
		return 0, err
	}
	var behind int64
	for part, end := range ends {
		if d := end - pos[part]; d > 0 {
			behind += d
		}
	}
	return behind, nil
}
