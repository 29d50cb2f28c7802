package sqlitebus

import (
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// TestLoneCallsDoNotLinger: calls that arrive far apart commit at once, however long the linger.
func TestLoneCallsDoNotLinger(t *testing.T) {
	b := newTestBusWith(t, tempDBPath(t), Config{CompactInterval: -1, PublishLinger: time.Second})
	pub := mustPublisher(t, b)
	for i := range 5 {
		start := time.Now()
		if err := pub.Publish("t", message.NewMessage(watermill.NewUUID(), []byte("x"))); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el > 500*time.Millisecond {
			t.Fatalf("publish %d took %v: a lone call waited for company", i, el)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBusyCallsShareCommits: calls that arrive back to back share commits, and every message is stored once.
func TestBusyCallsShareCommits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		linger time.Duration
	}{{"linger", 5 * time.Millisecond}, {"no linger", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBusWith(t, tempDBPath(t), Config{CompactInterval: -1, PublishLinger: tc.linger})
			pub := mustPublisher(t, b)
			const publishers, each = 16, 40
			var wg sync.WaitGroup
			for range publishers {
				wg.Go(func() {
					for range each {
						if err := pub.Publish("t", message.NewMessage(watermill.NewUUID(), []byte("x"))); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			var n int
			if err := b.db.QueryRow(`SELECT COUNT(*) FROM sqlitebus_messages WHERE topic = 't'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			commits := b.st.pubCommits.Load()
			if n != publishers*each {
				t.Fatalf("%d messages stored, want %d", n, publishers*each)
			}
			t.Logf("%d publishes in %d commits", n, commits)
			if tc.linger > 0 && commits > int64(n/2) {
				t.Errorf("%d publishes took %d commits: lingering leaders should gather more than two a commit", n, commits)
			}
		})
	}
}
