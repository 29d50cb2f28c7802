package consistency

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSharedQuery: waiters asking while a run is under way share it when it started after the
// time they give; a later time, or a failed run, makes a new one.
func TestSharedQuery(t *testing.T) {
	var q sharedQuery[int]
	var runs atomic.Int32
	release := make(chan struct{})
	run := func(context.Context) (int, error) {
		<-release
		return int(runs.Add(1)), nil
	}
	before := time.Now()
	first := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		close(first)
		if _, err := q.get(context.Background(), before, run); err != nil {
			t.Error(err)
		}
	})
	<-first
	waitFor(t, "the first run to start", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.last != nil
	})
	for range 5 {
		wg.Go(func() {
			if r, err := q.get(context.Background(), before, run); err != nil || r.val != 1 {
				t.Errorf("a waiter got %v, %v; want the shared run", r, err)
			}
		})
	}
	close(release)
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs for six waiters", n)
	}
	if r, _ := q.get(context.Background(), time.Now(), run); r.val != 2 {
		t.Fatalf("a waiter asking for a newer run got run %d", r.val)
	}
	boom := errors.New("boom")
	if _, err := q.get(context.Background(), time.Now(), func(context.Context) (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if r, err := q.get(context.Background(), time.Time{}, run); err != nil || r.val != 3 {
		t.Fatalf("after a failed run: %v, %v; want a new run", r, err)
	}
}
