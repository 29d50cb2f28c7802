package sqlitebus

import (
	"testing"
	"time"
)

// The mover lingers longer only while Publish calls come at least every moveLoadedGap: not
// before it knows a rate, not for a trickle, and not after a quiet spell. The rate is the
// publishers' moving average of the gaps between calls.
func TestMoveLinger(t *testing.T) {
	st := &dbState{pubGap: time.Hour} // as Hub.state makes it
	linger := func() time.Duration { return moveLingerFor(st.publishGap()) }
	if got := linger(); got != moveLinger {
		t.Errorf("no publish yet: linger %v, want %v", got, moveLinger)
	}
	at := time.Unix(0, 0)
	st.notePublish(at)
	if got := linger(); got != moveLinger {
		t.Errorf("one publish: linger %v, want %v", got, moveLinger)
	}
	for range 200 { // one a millisecond
		at = at.Add(time.Millisecond)
		st.notePublish(at)
	}
	if got := linger(); got != moveLingerLoaded {
		t.Errorf("a publish a millisecond (gap %v): linger %v, want %v", st.pubGap, got, moveLingerLoaded)
	}
	at = at.Add(time.Second)
	st.notePublish(at)
	if got := linger(); got != moveLinger {
		t.Errorf("after a quiet second (gap %v): linger %v, want %v", st.pubGap, got, moveLinger)
	}

	for _, tc := range []struct {
		every time.Duration
		want  time.Duration
	}{
		{50 * time.Millisecond, moveLinger},                  // a trickle
		{8 * time.Millisecond, moveLinger},                   // 125 a second: a message waits 2 ms, not 25
		{moveLoadedGap - time.Millisecond, moveLingerLoaded}, // 250 a second
	} {
		st := &dbState{pubGap: time.Hour}
		for range 300 { // the average forgets the hour it starts from
			at = at.Add(tc.every)
			st.notePublish(at)
		}
		if got := moveLingerFor(st.publishGap()); got != tc.want {
			t.Errorf("a publish every %v (gap %v): linger %v, want %v", tc.every, st.pubGap, got, tc.want)
		}
	}
}

// TestHurryEndsTheLinger: with a linger of an hour, a published message reaches a subscriber
// only because a reader asked the bus to hurry; a Bus without a journal ignores Hurry.
func TestHurryEndsTheLinger(t *testing.T) {
	b := newTestBusWith(t, tempDBPath(t), Config{CompactInterval: -1, PublishJournal: true, MoveLinger: time.Hour})
	msgs := mustSubscribe(t, mustSubscriber(t, b, "evaluate"), "t")
	ids := publishN(t, mustPublisher(t, b), "t", 1)
	b.Hurry()
	// The bound only ends a failed run: without the Hurry the message waits an hour.
	if m := receive(t, msgs, time.Minute); m.UUID != ids[0] {
		t.Fatalf("received %s, want %s", m.UUID, ids[0])
	}

	plain := newTestBus(t, tempDBPath(t))
	plain.Hurry()
}
