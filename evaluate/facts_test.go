package evaluate

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/veritrail/veritrail/evaluate/store"
	"github.com/veritrail/veritrail/ingest/contract"
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
				if c.size > tc.limit {
					t.Errorf("round %d: %d facts kept, over the limit of %d", i+1, c.size, tc.limit)
				}
			}
		})
	}
}
