package sqlitebus

import (
	"testing"
	"time"
)

// The mover lingers longer only while the moves show messages coming fast enough for the longer
// linger to gather at least two: not before it knows a rate, not for a trickle, and not after a
// quiet spell.
func TestMovePace(t *testing.T) {
	var p movePace
	if got := p.linger(); got != moveLinger {
		t.Errorf("no move yet: linger %v, want %v", got, moveLinger)
	}
	at := time.Unix(0, 0)
	p.add(3, at)
	if got := p.linger(); got != moveLinger {
		t.Errorf("one move: linger %v, want %v", got, moveLinger)
	}
	for range 10 { // 5 messages every 5 ms: one a millisecond
		at = at.Add(5 * time.Millisecond)
		p.add(5, at)
	}
	if got := p.linger(); got != moveLingerLoaded {
		t.Errorf("a message a millisecond (gap %v): linger %v, want %v", p.gap, got, moveLingerLoaded)
	}
	at = at.Add(time.Second)
	p.add(1, at)
	if got := p.linger(); got != moveLinger {
		t.Errorf("after a quiet second (gap %v): linger %v, want %v", p.gap, got, moveLinger)
	}

	var trickle movePace
	for range 20 { // one message every 50 ms
		at = at.Add(50 * time.Millisecond)
		trickle.add(1, at)
	}
	if got := trickle.linger(); got != moveLinger {
		t.Errorf("a trickle (gap %v): linger %v, want %v", trickle.gap, got, moveLinger)
	}
}
