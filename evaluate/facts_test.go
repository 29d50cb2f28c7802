package evaluate

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// countingReader counts the facts the store answers, to tell what the cache read again.
type countingReader struct {
	store.Store
	read int
}

func (c *countingReader) TrailAttestationFactsAfter(ctx context.Context, after map[string]int64) (map[string][]store.AttestationFact, map[string]int64, error) {
	facts, last, err := c.Store.TrailAttestationFactsAfter(ctx, after)
	for _, f := range facts {
		c.read += len(f)
	}
	return facts, last, err
}

// TestFactCacheReadsOnlyWhatIsNew: the kept facts plus what a trail gained are the trail's facts as
// the store has them, only the gained ones are read, and the bound on facts kept holds.
func TestFactCacheReadsOnlyWhatIsNew(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limit     int
		wantReads []int // facts read from the store by each round
	}{
		// Round 1 reads t1's 3; round 2 t1's 2 new and t2's 2; round 3 nothing new.
		{"all kept", 100, []int{3, 4, 0}},
		// A limit of 4 keeps t1's 3, then not its 5 (round 2 still reads only its 2 new) but t2's 2,
		// so round 3 reads t1 whole again.
		{"bounded", 4, []int{3, 4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.handle(f.env(contract.KindTrailBegun, func(e *contract.Envelope) {
				e.Trail = &contract.TrailBegin{ID: "trail-2", FlowID: "flow-1", Name: "t2"}
			}))
			ctx := context.Background()
			r := &countingReader{Store: f.st}
			c := newFactCache(tc.limit)
			add := func(trail string, n int) {
				for range n {
					f.handle(f.env(contract.KindAttestationReported, func(e *contract.Envelope) {
						e.Attestation = &contract.AttestationInput{ID: "att-" + e.ID, FlowID: "flow-1", TrailName: trail,
							Name: "tests", Type: "generic", IsCompliant: true, Data: json.RawMessage(`{}`)}
					}))
				}
			}
			rounds := []func(){
				func() { add("t1", 3) },
				func() { add("t1", 2); add("t2", 2) },
				func() {},
			}
			for i, round := range rounds {
				round()
				r.read = 0
				got, err := c.read(ctx, r, []string{"trail-1", "trail-2"})
				if err != nil {
					t.Fatal(err)
				}
				want, err := f.st.TrailAttestationFactsByIDs(ctx, []string{"trail-1", "trail-2"})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d: facts %+v, want the store's %+v", i+1, got, want)
				}
				if r.read != tc.wantReads[i] {
					t.Errorf("round %d: read %d facts from the store, want %d", i+1, r.read, tc.wantReads[i])
				}
				if c.kept.held > tc.limit {
					t.Errorf("round %d: %d facts kept, over the limit of %d", i+1, c.kept.held, tc.limit)
				}
			}
		})
	}
}

// TestFactGrowAppendsInPlaceAndNeverOverwrites: growing a trail's facts appends in place while it
// can, so a trail is not copied whole at every evaluation, and a slice handed out earlier keeps its
// facts when a stale copy of the same trail grows differently.
func TestFactGrowAppendsInPlaceAndNeverOverwrites(t *testing.T) {
	fact := func(id string) store.AttestationFact { return store.AttestationFact{ID: id} }
	ids := func(fs []store.AttestationFact) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.ID)
		}
		return out
	}

	f1 := trailFacts{}.grow(1, []store.AttestationFact{fact("a")})
	f2 := f1.grow(2, []store.AttestationFact{fact("b")})
	if &f2.facts[0] != &f1.facts[0] {
		t.Errorf("the second fact was not appended in place: the array has room for it")
	}
	handedOut := f2.facts

	// f1 is stale now (f2 was appended past it): growing it must not write into f2's array.
	f3 := f1.grow(3, []store.AttestationFact{fact("c")}) // would fit f1's array
	if got := ids(handedOut); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("a slice handed out earlier changed to %v", got)
	}
	if got := ids(f3.facts); !reflect.DeepEqual(got, []string{"a", "c"}) || f3.last != 3 {
		t.Fatalf("stale base grown to %v (last %d), want [a c] (3)", got, f3.last)
	}

	// One at a time, 1,000 facts move between a logarithmic number of arrays.
	var f trailFacts
	arrays := 0
	for i := range 1000 {
		before := f.array
		f = f.grow(int64(i+1), []store.AttestationFact{fact("x")})
		if f.array != before {
			arrays++
		}
	}
	if len(f.facts) != 1000 || arrays > 11 {
		t.Errorf("%d facts in %d arrays, want 1000 in at most 11", len(f.facts), arrays)
	}
}

// positionReader answers, for each trail, facts named by their positions up to the count its
// writers have reached: a store whose trails keep gaining attestations.
type positionReader struct {
	store.Store
	mu    sync.Mutex
	count map[string]int64
}

func (r *positionReader) add(trail string) {
	r.mu.Lock()
	r.count[trail]++
	r.mu.Unlock()
}

func (r *positionReader) TrailAttestationFactsAfter(_ context.Context, after map[string]int64) (map[string][]store.AttestationFact, map[string]int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	facts, last := map[string][]store.AttestationFact{}, map[string]int64{}
	for trail, from := range after {
		n := r.count[trail]
		for p := from + 1; p <= n; p++ {
			facts[trail] = append(facts[trail], store.AttestationFact{ID: strconv.FormatInt(p, 10)})
		}
		if n > from {
			last[trail] = n
		}
	}
	return facts, last, nil
}

// TestFactCacheConcurrentReads: evaluations that read the same trails at once, while the trails
// gain attestations, each get every fact of the trail in order (under -race: no slice handed out is
// written while it is read).
func TestFactCacheConcurrentReads(t *testing.T) {
	r := &positionReader{count: map[string]int64{}}
	c := newFactCache(1 << 20)
	trails := []string{"t1", "t2"}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r.add(trails[i%len(trails)])
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 300 {
				got, err := c.read(context.Background(), r, trails)
				if err != nil {
					t.Error(err)
					return
				}
				for trail, facts := range got {
					for i, f := range facts {
						if f.ID != strconv.Itoa(i+1) {
							t.Errorf("%s: fact %d is %s, want %d", trail, i, f.ID, i+1)
							return
						}
					}
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
}

// TestFactCacheInTransactionKeepsOnlyCommitted: facts and decision controls read inside a
// transaction include its own attestations, and are kept only if it commits: a rolled-back
// decision must not be judged from the cache later.
func TestFactCacheInTransactionKeepsOnlyCommitted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := newFactCache(100)
	errRollback := errors.New("roll back")
	decide := func(tx store.Tx, id string) error {
		return tx.InsertAttestations(ctx, []store.Attestation{{ID: id, OrgID: "org-1", FlowID: "flow-1", TrailID: "trail-1",
			Name: "release", Type: "decision", IsCompliant: true, Data: json.RawMessage(`{"control":"change-approval"}`), CreatedAt: 1}})
	}
	read := func(tx store.Tx, id string) (int, string) {
		facts, err := c.readIn(ctx, tx, []string{"trail-1"})
		if err != nil {
			t.Fatal(err)
		}
		controls, err := c.decisionControlsIn(ctx, tx, []string{id})
		if err != nil {
			t.Fatal(err)
		}
		return len(facts["trail-1"]), controls[id]
	}
	err := f.st.Update(ctx, func(tx store.Tx) error {
		if err := decide(tx, "d-1"); err != nil {
			return err
		}
		if n, control := read(tx, "d-1"); n != 1 || control != "change-approval" {
			t.Errorf("inside the transaction: %d facts, control %q; want its own decision", n, control)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if _, ok := c.kept.Peek("trail-1"); ok || c.controls.Len() != 0 {
		t.Fatalf("a rolled-back transaction's reads were kept")
	}
	if err := f.st.Update(ctx, func(tx store.Tx) error {
		if err := decide(tx, "d-2"); err != nil {
			return err
		}
		read(tx, "d-2")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	kept, _ := c.kept.Peek("trail-1")
	if control, _ := c.controls.Get("d-2"); len(kept.facts) != 1 || kept.facts[0].ID != "d-2" || control != "change-approval" {
		t.Fatalf("after commit: kept %+v, control %q; want the committed decision", kept.facts, control)
	}
}
