package sqlitebus

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// lagBus delivers one message at a time, so that each ack is stored (and counted) alone.
func lagBus(t *testing.T, maxLag int, wait time.Duration) *Bus {
	t.Helper()
	return newTestBusWith(t, tempDBPath(t), Config{NackResendSleep: time.Millisecond, CompactInterval: -1,
		PublishJournal: true, MaxLag: maxLag, LagGroup: "eval", MaxLagWait: wait})
}

// publishAsync publishes one message per call and reports each return.
func publishAsync(t *testing.T, p *Publisher, topic string, n int) <-chan error {
	t.Helper()
	done := make(chan error, n)
	go func() {
		for i := range n {
			done <- p.Publish(topic, message.NewMessage(fmt.Sprint(topic, i), nil))
		}
	}()
	return done
}

// returned counts the publishes that returned within d.
func returned(t *testing.T, done <-chan error, d time.Duration) int {
	t.Helper()
	n := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			n++
		case <-time.After(d):
			return n
		}
	}
}

// A consumer of the lag group that does not ack holds publishers to the topic back once
// MaxLag messages are unacked; its acks let them go on.
func TestLagHoldsPublishersForTheConsumer(t *testing.T) {
	b := lagBus(t, 5, time.Minute)
	ch := mustSubscribe(t, mustSubscriber(t, b, "eval"), "evidence")
	done := publishAsync(t, mustPublisher(t, b), "evidence", 20)
	if n := returned(t, done, 300*time.Millisecond); n != 6 {
		t.Fatalf("%d publishes returned with nothing acked and MaxLag 5; want 6 (the sixth passes at 5 unacked)", n)
	}
	for range 4 {
		receive(t, ch, 5*time.Second).Ack()
	}
	if n := returned(t, done, 300*time.Millisecond); n != 4 {
		t.Fatalf("%d more publishes returned after 4 acks; want 4", n)
	}
	go func() {
		for m := range ch {
			m.Ack()
		}
	}()
	if n := returned(t, done, 2*time.Second); n != 10 {
		t.Fatalf("%d more publishes returned once the consumer acked everything; want the last 10", n)
	}
}

// A stuck consumer slows publishers by MaxLagWait each; it does not stop them.
func TestLagWaitIsBounded(t *testing.T) {
	b := lagBus(t, 2, 30*time.Millisecond)
	mustSubscribe(t, mustSubscriber(t, b, "eval"), "evidence")
	start := time.Now()
	done := publishAsync(t, mustPublisher(t, b), "evidence", 8)
	if n := returned(t, done, time.Second); n != 8 {
		t.Fatalf("%d of 8 publishes returned", n)
	}
	if d := time.Since(start); d < 5*30*time.Millisecond {
		t.Errorf("8 publishes, 5 over the bound, took %v; each over it should wait 30ms", d)
	}
}

// With no subscription of the lag group in the process (ingest alone, or the group's
// consumer stopped), publishers never wait; acks of another group do not count.
func TestLagOnlyForTheSubscribedGroup(t *testing.T) {
	b := lagBus(t, 2, time.Minute)
	other := mustSubscribe(t, mustSubscriber(t, b, "notify"), "evidence")
	go func() {
		for m := range other {
			m.Ack()
		}
	}()
	if n := returned(t, publishAsync(t, mustPublisher(t, b), "evidence", 20), time.Second); n != 20 {
		t.Fatalf("%d of 20 publishes returned with no lag-group subscriber", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	if _, err := mustSubscriber(t, b, "eval").Subscribe(ctx, "evidence"); err != nil {
		t.Fatal(err)
	}
	done := publishAsync(t, mustPublisher(t, b), "other-topic", 5)
	if n := returned(t, done, time.Second); n != 5 {
		t.Fatalf("%d of 5 publishes to a topic the group does not consume returned", n)
	}
	done = publishAsync(t, mustPublisher(t, b), "evidence", 3)
	if n := returned(t, done, 300*time.Millisecond); n != 0 {
		t.Fatalf("%d publishes returned with the group subscribed and 20 unacked", n)
	}
	cancel() // the consumer leaves: the waiting publisher goes on
	if n := returned(t, done, 2*time.Second); n != 3 {
		t.Fatalf("%d of 3 publishes returned after the lag group's subscription ended", n)
	}
}

// With a window of messages in flight (how the evaluator consumes), the acks of a window count
// once they are stored, and a consumer that keeps up never holds publishers for long.
func TestLagCountsWindowAcks(t *testing.T) {
	b := newTestBusWith(t, tempDBPath(t), Config{NackResendSleep: time.Millisecond, CompactInterval: -1,
		PublishJournal: true, MaxInFlight: 4, MaxLag: 5, LagGroup: "eval", MaxLagWait: time.Minute})
	ch := mustSubscribe(t, mustSubscriber(t, b, "eval"), "evidence")
	go func() {
		for m := range ch {
			m.Ack()
		}
	}()
	if n := returned(t, publishAsync(t, mustPublisher(t, b), "evidence", 50), 2*time.Second); n != 50 {
		t.Fatalf("%d of 50 publishes returned with a consumer acking everything", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.st.lag.mu.Lock()
		left := b.st.lag.unacked["evidence"]
		b.st.lag.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still counted unacked after the consumer acked all 50", left)
		}
		time.Sleep(time.Millisecond)
	}
}
