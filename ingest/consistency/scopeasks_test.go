package consistency

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// TestPeersScopeQuestionsShareTheNextQuery: the reads that start while a scope query is under
// way share the next one, which asks for all their scopes, and each read sees the scopes
// recorded before it started, also those recorded after the query under way was sent.
func TestPeersScopeQuestionsShareTheNextQuery(t *testing.T) {
	st := newFakePeerStore()
	a, b := newTestPeers(st, "a", nil), newTestPeers(st, "b", nil)
	ctx := context.Background()
	publish(t, a, "t1")
	gate := make(chan struct{})
	st.set(func() { st.scopeGate = gate })

	held := func(scopes ...string) <-chan bool {
		out := make(chan bool, 1)
		go func() { out <- b.holdScopes(ctx, "acme", scopes) }()
		return out
	}
	first := held("t9")
	for st.calls(func() int { return st.scopeLooks }) < 1 {
		runtime.Gosched()
	}
	publish(t, a, "t2") // recorded while the first query is under way: it does not see it
	second, third, fourth := held("t2"), held("t3"), held("t1")
	asks := &b.orgReads("acme").scopes
	for joined(asks) < 4 { // t2, t3, t1 and ""
		runtime.Gosched()
	}
	close(gate)
	for name, c := range map[string]struct {
		got  <-chan bool
		want bool
	}{"t9": {first, false}, "t2": {second, true}, "t3": {third, false}, "t1": {fourth, true}} {
		if got := <-c.got; got != c.want {
			t.Errorf("a read of %s: held %v, want %v", name, got, c.want)
		}
	}
	asked := st.calls(func() int { return st.scopeLooks })
	if asked != 2 || !slices.Equal(st.scopesAsked[1], []string{"", "t1", "t2", "t3"}) {
		t.Fatalf("%d queries, asking %q; want 2, the second for the three reads that waited", asked, st.scopesAsked)
	}
}

// joined counts the scopes gathered for the next scope query.
func joined(a *scopeAsks) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next == nil {
		return 0
	}
	return len(a.next.scopes)
}

// TestPeersScopeQuestionsConcurrent: many reads at once each get the answer for their own
// scopes, whatever query they shared (run with -race).
func TestPeersScopeQuestionsConcurrent(t *testing.T) {
	st := newFakePeerStore()
	a, b := newTestPeers(st, "a", nil), newTestPeers(st, "b", nil)
	publish(t, a, "t0", "t2", "t4")
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 400 {
		wg.Go(func() {
			sc := fmt.Sprintf("t%d", i%8)
			want := i%8 <= 4 && i%2 == 0
			if got := b.holdScopes(context.Background(), "acme", []string{sc}); got != want {
				errs <- fmt.Errorf("a read of %s: held %v, want %v", sc, got, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := st.calls(func() int { return st.scopeLooks }); n > 400 {
		t.Fatalf("%d queries for 400 reads", n)
	}
}
