package backlog

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// recorder is the publisher behind the gate: it keeps what reached it.
type recorder struct {
	mu  sync.Mutex
	got map[string]int
}

func (r *recorder) Publish(topic string, msgs ...*message.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[string]int{}
	}
	r.got[topic] += len(msgs)
	return nil
}

func (r *recorder) Close() error { return nil }

func (r *recorder) count(topic string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[topic]
}

// bus is one partition whose end and consumer position a test moves; it counts measurements.
type bus struct {
	end, pos atomic.Int64
	fail     atomic.Bool
	measured atomic.Int64
}

func (b *bus) ends(context.Context) (map[int32]int64, error) {
	b.measured.Add(1)
	if b.fail.Load() {
		return nil, errors.New("broker unreachable")
	}
	return map[int32]int64{0: b.end.Load(), 1: 7}, nil
}

func (b *bus) positions(context.Context) (map[int32]int64, error) {
	return map[int32]int64{0: b.pos.Load(), 1: 7}, nil
}

// start runs a gate over b until the test ends.
func start(t *testing.T, b *bus, maxWait time.Duration) (*Publisher, *recorder) {
	t.Helper()
	rec := &recorder{}
	p := New(rec, Config{Topic: "evidence", Ends: b.ends, Positions: b.positions, Max: 100, MaxWait: maxWait, Poll: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p, rec
}

// measuredTwiceMore waits until the gate has measured the backlog at least twice more: the
// second measurement started after the call, so the gate knows the bus as it is now.
func measuredTwiceMore(t *testing.T, b *bus) {
	t.Helper()
	n := b.measured.Load()
	for b.measured.Load() < n+2 {
		time.Sleep(time.Millisecond)
	}
}

func publish(p *Publisher, topic string) chan error {
	done := make(chan error, 1)
	go func() { done <- p.Publish(topic, message.NewMessage("1", nil)) }()
	return done
}

func TestPublishPassesWhileConsumersKeepUp(t *testing.T) {
	b := &bus{}
	b.end.Store(150)
	b.pos.Store(60) // 90 behind, under 100
	p, rec := start(t, b, time.Hour)
	if err := p.Publish("evidence", message.NewMessage("1", nil)); err != nil {
		t.Fatal(err)
	}
	measuredTwiceMore(t, b)
	if err := <-publish(p, "evidence"); err != nil {
		t.Fatal(err)
	}
	if got := rec.count("evidence"); got != 2 {
		t.Fatalf("published %d, want 2", got)
	}
}

func TestPublishWaitsForConsumers(t *testing.T) {
	b := &bus{}
	b.end.Store(1000)
	p, rec := start(t, b, time.Hour)
	_ = p.Publish("evidence", message.NewMessage("0", nil)) // wakes the measuring
	measuredTwiceMore(t, b)
	if got := p.Backlog(); got != 1000 {
		t.Fatalf("backlog %d, want 1000", got)
	}

	held := publish(p, "evidence")
	other := publish(p, "triggers") // another topic is not held back
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	measuredTwiceMore(t, b)
	select {
	case <-held:
		t.Fatal("published while the consumers were 1000 behind")
	default:
	}
	if got := rec.count("evidence"); got != 1 {
		t.Fatalf("published %d, want only the first", got)
	}

	b.pos.Store(950)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if got := rec.count("evidence"); got != 2 {
		t.Fatalf("published %d, want 2", got)
	}
}

func TestPublishGoesAheadWhenConsumersAreStuck(t *testing.T) {
	b := &bus{}
	b.end.Store(1000)
	p, rec := start(t, b, 5*time.Millisecond)
	_ = p.Publish("evidence", message.NewMessage("0", nil))
	measuredTwiceMore(t, b)
	if err := <-publish(p, "evidence"); err != nil {
		t.Fatal(err)
	}
	if got := rec.count("evidence"); got != 2 {
		t.Fatalf("published %d, want 2", got)
	}
}

func TestPublishNotHeldWhenBacklogUnknown(t *testing.T) {
	b := &bus{}
	b.end.Store(1000)
	b.fail.Store(true)
	p, _ := start(t, b, time.Hour)
	_ = p.Publish("evidence", message.NewMessage("0", nil))
	measuredTwiceMore(t, b)
	if err := <-publish(p, "evidence"); err != nil {
		t.Fatal(err)
	}
}
