package sqlitebus

import (
	"testing"
	"time"
)

// The mover lingers longer only while Publish calls come fast enough for the longer linger to
// gather at least two: not before it knows a rate, not for a trickle, and not after a quiet
// spell. The rate is the publishers' moving average of the gaps between calls.
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

	trickle := &dbState{pubGap: time.Hour}
	for range 20 { // one every 50 ms
		at = at.Add(50 * time.Millisecond)
		trickle.notePublish(at)
	}
	if got := moveLingerFor(trickle.publishGap()); got != moveLinger {
		t.Errorf("a trickle (gap %v): linger %v, want %v", trickle.pubGap, got, moveLinger)
	}
}
