package sqlitebus

import (
	"sync"
	"time"
)

// lagGate bounds how far one consumer group, subscribed in this process, may
// fall behind the publishers of this process (Config.MaxLag). When publisher
// and consumer share the machine's cores, as in `veritrail serve`, nothing
// else stops a fast publisher from taking the processor its consumer needs:
// the backlog, and with it the wait of every read-your-writes request, would
// grow for as long as the load lasts. With the gate, a Publish to a topic
// whose consumer is more than max messages behind waits for acks, for up to
// wait: a consumer that is stuck slows publishers down, it does not stop
// them.
//
// Only messages published (or recovered from the journal) by this Bus count:
// those in the table when it opened, at or below startOffset, are a backlog
// from before, and no Publish waited for them.
type lagGate struct {
	group       string
	max         int64
	wait        time.Duration
	startOffset int64

	mu         sync.Mutex
	unacked    map[string]int64 // topic -> messages published here and not acked by group
	subscribed map[string]int   // topic -> running subscriptions of group here
	changed    chan struct{}    // closed and replaced when a topic's count falls
}

func newLagGate(group string, maxLag int, wait time.Duration, startOffset int64) *lagGate {
	return &lagGate{group: group, max: int64(maxLag), wait: wait, startOffset: startOffset,
		unacked: map[string]int64{}, subscribed: map[string]int{}, changed: make(chan struct{})}
}

// admit counts n messages about to be published to topic, first waiting (up
// to the gate's wait) while the group is subscribed here and too far behind.
// A publish that then fails gives them back with acked.
func (g *lagGate) admit(topic string, n int) {
	var deadline <-chan time.Time
	g.mu.Lock()
	for g.subscribed[topic] > 0 && g.unacked[topic] > g.max {
		if deadline == nil {
			t := time.NewTimer(g.wait)
			defer t.Stop()
			deadline = t.C
		}
		changed := g.changed
		g.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			g.mu.Lock()
			g.unacked[topic] += int64(n)
			g.mu.Unlock()
			return
		}
		g.mu.Lock()
	}
	g.unacked[topic] += int64(n)
	g.mu.Unlock()
}

// acked uncounts n messages of topic.
func (g *lagGate) acked(topic string, n int) {
	if n == 0 {
		return
	}
	g.mu.Lock()
	// Messages of other processes are acked without having been counted.
	g.unacked[topic] = max(g.unacked[topic]-int64(n), 0)
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

// subscribe notes a subscription of the group to topic starting (+1) or ending (-1).
func (g *lagGate) subscribe(topic string, delta int) {
	g.mu.Lock()
	g.subscribed[topic] += delta
	close(g.changed) // a publisher waiting for a consumer that left stops waiting
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

// ackedWindow uncounts the messages of window that count: those after startOffset.
func (g *lagGate) ackedWindow(topic string, window []stored) {
	n := 0
	for _, m := range window {
		if m.offset > g.startOffset {
			n++
		}
	}
	g.acked(topic, n)
}

// behind returns how many messages of topic published here the group has not acked.
func (g *lagGate) behind(topic string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.unacked[topic]
}

// Behind returns how many messages of topic published by this process the configured
// LagGroup has not acknowledged yet (the evaluator's backlog, for metrics); 0 without a
// LagGroup.
func (b *Bus) Behind(topic string) int64 {
	if b.st.lag == nil {
		return 0
	}
	return b.st.lag.behind(topic)
}
