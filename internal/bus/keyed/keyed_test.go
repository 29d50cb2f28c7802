package keyed

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cenkalti/backoff/v5"
)

func msg(id, key string) *message.Message {
	m := message.NewMessage(id, nil)
	m.Metadata.Set("partition_key", key)
	return m
}

var fast = Config{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// run consumes msgs with h until the test ends.
func run(t *testing.T, cfg Config, h Handler) chan<- *message.Message {
	t.Helper()
	in := make(chan *message.Message)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Consume(ctx, in, cfg, h, quiet())
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return in
}

func acked(t *testing.T, ms ...*message.Message) {
	t.Helper()
	for _, m := range ms {
		select {
		case <-m.Acked():
		case <-m.Nacked():
			t.Fatalf("%s was nacked", m.UUID)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s was not acked", m.UUID)
		}
	}
}

// TestOrderWithinAKeyAndParallelAcross: a key's messages are handled one after the other even
// when the first is slow, while another key's message is handled meanwhile.
func TestOrderWithinAKeyAndParallelAcross(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	in := run(t, fast, func(_ context.Context, m *message.Message) error {
		if m.UUID == "a1" {
			<-release
		}
		mu.Lock()
		order = append(order, m.UUID)
		mu.Unlock()
		return nil
	})
	a1, a2, b1 := msg("a1", "A"), msg("a2", "A"), msg("b1", "B")
	in <- a1
	in <- a2
	in <- b1
	acked(t, b1) // handled while a1 is still blocked
	select {
	case <-a2.Acked():
		t.Fatal("a2 was handled before a1")
	default:
	}
	close(release)
	acked(t, a1, a2)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []string{"b1", "a1", "a2"}) {
		t.Fatalf("handled %v", order)
	}
}

// TestRetriesUntilDone: failures and panics are retried; the message is acked once done.
func TestRetriesUntilDone(t *testing.T) {
	var calls atomic.Int32
	in := run(t, fast, func(context.Context, *message.Message) error {
		switch calls.Add(1) {
		case 1:
			return errors.New("store unreachable")
		case 2:
			panic("bad day")
		}
		return nil
	})
	m := msg("m", "A")
	in <- m
	acked(t, m)
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}
}

// TestConcurrencyBound: no more messages are in flight than Concurrency.
func TestConcurrencyBound(t *testing.T) {
	cfg := fast
	cfg.Concurrency = 2
	started := make(chan string, 3)
	release := make(chan struct{})
	in := run(t, cfg, func(_ context.Context, m *message.Message) error {
		started <- m.UUID
		<-release
		return nil
	})
	a, b, c := msg("a", "A"), msg("b", "B"), msg("c", "C")
	in <- a
	in <- b
	sent := make(chan struct{})
	go func() {
		in <- c // taken only once a slot frees
		close(sent)
	}()
	<-started
	<-started
	select {
	case <-sent:
		t.Fatal("a third message was taken while two were in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	acked(t, a, b, c)
}

// TestStopNacks: a message not done when the consumer stops goes back to the bus.
func TestStopNacks(t *testing.T) {
	in := make(chan *message.Message)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	handling := make(chan struct{})
	go func() {
		Consume(ctx, in, fast, func(ctx context.Context, _ *message.Message) error {
			close(handling)
			<-ctx.Done()
			return ctx.Err()
		}, quiet())
		close(done)
	}()
	m := msg("m", "A")
	in <- m
	<-handling
	cancel()
	<-done
	select {
	case <-m.Nacked():
	default:
		t.Fatal("the unfinished message was not nacked")
	}
}

// recordedBackOff answers every wait with 0 and counts them.
type recordedBackOff struct{ waits atomic.Int32 }

func (b *recordedBackOff) NextBackOff() time.Duration { b.waits.Add(1); return 0 }
func (b *recordedBackOff) Reset()                     {}

// TestRetriesWaitOnTheBackOff: each retry of a message takes its wait from the message's own
// backoff.
func TestRetriesWaitOnTheBackOff(t *testing.T) {
	b := &recordedBackOff{}
	var made atomic.Int32
	cfg := Config{NewBackOff: func() backoff.BackOff { made.Add(1); return b }}
	var calls atomic.Int32
	in := run(t, cfg, func(context.Context, *message.Message) error {
		if calls.Add(1) <= 3 {
			return errors.New("store unavailable")
		}
		return nil
	})
	m := msg("m", "A")
	in <- m
	acked(t, m)
	if made.Load() != 1 || b.waits.Load() != 3 {
		t.Fatalf("backoffs %d asked %d times; want one asked 3 times", made.Load(), b.waits.Load())
	}
}
