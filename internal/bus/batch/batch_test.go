package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cenkalti/backoff/v5"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// feed returns a closed channel holding n messages named m0, m1, ...
func feed(n int) (<-chan *message.Message, []*message.Message) {
	ch := make(chan *message.Message, n)
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(fmt.Sprintf("m%d", i), nil)
		ch <- msgs[i]
	}
	close(ch)
	return ch, msgs
}

func names(msgs []*message.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.UUID
	}
	return out
}

func state(m *message.Message) string {
	select {
	case <-m.Acked():
		return "acked"
	case <-m.Nacked():
		return "nacked"
	default:
		return "pending"
	}
}

// recorder is a handler that records each call's messages and answers from a script.
type recorder struct {
	mu     sync.Mutex
	calls  [][]string
	script []func([]*message.Message) (int, error)
}

func (r *recorder) handle(_ context.Context, msgs []*message.Message) (int, error) {
	r.mu.Lock()
	r.calls = append(r.calls, names(msgs))
	n := len(r.calls)
	r.mu.Unlock()
	if n <= len(r.script) {
		return r.script[n-1](msgs)
	}
	return len(msgs), nil
}

func TestConsume(t *testing.T) {
	fail := errors.New("store unavailable")
	fast := Config{InitialInterval: time.Millisecond, MaxRetries: 2}
	tests := []struct {
		name      string
		n         int
		cfg       Config
		script    []func([]*message.Message) (int, error)
		wantCalls [][]string
		wantState []string
	}{
		{
			name:      "ready messages go in one batch",
			n:         5,
			cfg:       fast,
			wantCalls: [][]string{{"m0", "m1", "m2", "m3", "m4"}},
			wantState: []string{"acked", "acked", "acked", "acked", "acked"},
		},
		{
			name:      "MaxBatch bounds a batch",
			n:         5,
			cfg:       Config{MaxBatch: 2, InitialInterval: time.Millisecond},
			wantCalls: [][]string{{"m0", "m1"}, {"m2", "m3"}, {"m4"}},
			wantState: []string{"acked", "acked", "acked", "acked", "acked"},
		},
		{
			name: "the finished prefix is acked and the rest retried",
			n:    4,
			cfg:  fast,
			script: []func([]*message.Message) (int, error){
				func([]*message.Message) (int, error) { return 2, fail },
			},
			wantCalls: [][]string{{"m0", "m1", "m2", "m3"}, {"m2", "m3"}},
			wantState: []string{"acked", "acked", "acked", "acked"},
		},
		{
			name: "a panic is retried",
			n:    2,
			cfg:  fast,
			script: []func([]*message.Message) (int, error){
				func([]*message.Message) (int, error) { panic("bad message") },
			},
			wantCalls: [][]string{{"m0", "m1"}, {"m0", "m1"}},
			wantState: []string{"acked", "acked"},
		},
		{
			name: "spent retries nack the rest",
			n:    3,
			cfg:  fast,
			script: []func([]*message.Message) (int, error){
				func([]*message.Message) (int, error) { return 1, fail },
				func([]*message.Message) (int, error) { return 0, fail },
				func([]*message.Message) (int, error) { return 0, fail },
			},
			wantCalls: [][]string{{"m0", "m1", "m2"}, {"m1", "m2"}, {"m1", "m2"}},
			wantState: []string{"acked", "nacked", "nacked"},
		},
		{
			name: "stopping early without an error counts as a failure",
			n:    2,
			cfg:  fast,
			script: []func([]*message.Message) (int, error){
				func([]*message.Message) (int, error) { return 1, nil },
			},
			wantCalls: [][]string{{"m0", "m1"}, {"m1"}},
			wantState: []string{"acked", "acked"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ch, msgs := feed(tc.n)
			r := &recorder{script: tc.script}
			Consume(context.Background(), ch, tc.cfg, r.handle, quiet)
			if !slices.EqualFunc(r.calls, tc.wantCalls, slices.Equal) {
				t.Errorf("calls %v, want %v", r.calls, tc.wantCalls)
			}
			var got []string
			for _, m := range msgs {
				got = append(got, state(m))
			}
			if !slices.Equal(got, tc.wantState) {
				t.Errorf("states %v, want %v", got, tc.wantState)
			}
		})
	}
}

// A message that arrives within Linger joins the batch; one that comes later starts the next.
func TestConsumeLinger(t *testing.T) {
	ch := make(chan *message.Message)
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		Consume(context.Background(), ch, Config{Linger: 200 * time.Millisecond}, r.handle, quiet)
		close(done)
	}()
	ch <- message.NewMessage("a", nil)
	ch <- message.NewMessage("b", nil) // within the linger
	time.Sleep(time.Second)            // longer than the linger: "a" and "b" are handled
	ch <- message.NewMessage("c", nil)
	close(ch)
	<-done
	want := [][]string{{"a", "b"}, {"c"}}
	if !slices.EqualFunc(r.calls, want, slices.Equal) {
		t.Errorf("calls %v, want %v", r.calls, want)
	}
}

// A Window keeps a batch open past gaps longer than the linger, until the window ends (an hour
// here: the channel's closing ends the batch).
func TestConsumeWindowOutlastsLinger(t *testing.T) {
	ch := make(chan *message.Message)
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		Consume(context.Background(), ch, Config{Linger: time.Nanosecond, Window: time.Hour}, r.handle, quiet)
		close(done)
	}()
	ch <- message.NewMessage("a", nil)
	time.Sleep(20 * time.Millisecond) // far past the linger; a slower machine only makes it shorter in effect
	ch <- message.NewMessage("b", nil)
	close(ch)
	<-done
	if want := [][]string{{"a", "b"}}; !slices.EqualFunc(r.calls, want, slices.Equal) {
		t.Errorf("calls %v, want %v", r.calls, want)
	}
}

// A batch closes when its Window ends, though the channel stays open and the batch is not full.
func TestConsumeWindowCloses(t *testing.T) {
	ch := make(chan *message.Message)
	handled := make(chan []string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Consume(ctx, ch, Config{Window: 10 * time.Millisecond}, func(_ context.Context, msgs []*message.Message) (int, error) {
		handled <- names(msgs)
		return len(msgs), nil
	}, quiet)
	ch <- message.NewMessage("a", nil)
	select {
	case got := <-handled:
		if !slices.Equal(got, []string{"a"}) {
			t.Errorf("handled %v, want [a]", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("the batch never closed")
	}
}

// Cancelling the context stops the consumer and nacks what was not finished.
func TestConsumeStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan *message.Message, 1)
	m := message.NewMessage("a", nil)
	ch <- m
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		Consume(ctx, ch, Config{InitialInterval: time.Hour}, func(context.Context, []*message.Message) (int, error) {
			close(started)
			return 0, errors.New("store unavailable")
		}, quiet)
		close(done)
	}()
	<-started
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Consume did not return after the context ended")
	}
	if s := state(m); s != "nacked" {
		t.Errorf("message %s, want nacked", s)
	}
}

// recordedBackOff answers every wait with 0 and counts them.
type recordedBackOff struct{ waits int }

func (b *recordedBackOff) NextBackOff() time.Duration { b.waits++; return 0 }
func (b *recordedBackOff) Reset()                     {}

// TestRetriesWaitOnTheBackOff: each retry of a batch takes its wait from the batch's own
// backoff, MaxRetries times before the rest is nacked.
func TestRetriesWaitOnTheBackOff(t *testing.T) {
	var made []*recordedBackOff
	cfg := Config{MaxRetries: 3, NewBackOff: func() backoff.BackOff {
		made = append(made, &recordedBackOff{})
		return made[len(made)-1]
	}}
	ch, msgs := feed(1)
	Consume(context.Background(), ch, cfg, func(context.Context, []*message.Message) (int, error) {
		return 0, errors.New("store unavailable")
	}, quiet)
	if len(made) != 1 || made[0].waits != 3 {
		t.Fatalf("backoffs %d, waits %v; want one backoff asked 3 times", len(made), made)
	}
	if s := state(msgs[0]); s != "nacked" {
		t.Errorf("message %s, want nacked", s)
	}
}
