package evaluate

import "github.com/hashicorp/golang-lru/v2/simplelru"

// weightedLRU is a least-recently-used map bounded by the total weight of its values (the facts
// of trails, the artifacts of snapshots) rather than by their number. It is not safe for
// concurrent use: its users guard it with their own lock.
type weightedLRU[V any] struct {
	lru    *simplelru.LRU[string, V]
	weight func(V) int
	limit  int
	held   int // the weight of the values kept, at most limit
}

func newWeightedLRU[V any](limit int, weight func(V) int) *weightedLRU[V] {
	w := &weightedLRU[V]{weight: weight, limit: limit}
	// The count bound is never what evicts (every value kept weighs at least 1); held is.
	w.lru, _ = simplelru.NewLRU(max(limit, 1), func(_ string, v V) { w.held -= weight(v) })
	return w
}

// Get answers k's value and makes it the most recently used.
func (w *weightedLRU[V]) Get(k string) (V, bool) { return w.lru.Get(k) }

// Peek answers k's value without making it recently used.
func (w *weightedLRU[V]) Peek(k string) (V, bool) { return w.lru.Peek(k) }

// Remove drops k's value, if kept.
func (w *weightedLRU[V]) Remove(k string) { w.lru.Remove(k) }

// Put keeps v under k, evicting the least recently used values past the limit. A value heavier
// than the limit is not kept, and k's old value goes all the same.
func (w *weightedLRU[V]) Put(k string, v V) {
	w.lru.Remove(k)
	if w.weight(v) > w.limit {
		return
	}
	w.lru.Add(k, v)
	w.held += w.weight(v)
	for w.held > w.limit {
		w.lru.RemoveOldest()
	}
}
