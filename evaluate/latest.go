package evaluate

import (
	"bytes"
	"sync"
	"time"

	"github.com/veritrail/veritrail/internal/snapshot"
	"github.com/veritrail/veritrail/internal/store"
)

// latestSnapshots keeps in memory, per environment, the latest snapshot this evaluator wrote:
// its running set and its artifacts, each with its JSON. The next snapshot of the environment
// starts from it instead of decoding the stored document, and keeps the artifacts whose
// evidence did not change since (store.RunningChanges) as they were. The store stays the
// truth: an entry is used only while the environment's latest stored snapshot has its index
// and digest (another evaluator may have written a newer one), and it is seen outside the
// transaction that wrote the snapshot only once that commits.
type latestSnapshots struct {
	mu    sync.Mutex
	byEnv *weightedLRU[*latestSnapshot] // weighing their artifacts
	now   func() time.Time
	// staged are the snapshots written by transactions still open, by transaction: a batch
	// that applies several reports of an environment starts each from the one before it.
	staged map[store.Tx]map[string]*latestSnapshot
	// startedInTx are, by transaction still open and environment, the fingerprints the
	// snapshots it wrote started and the latest of them still runs (settleMarks).
	startedInTx map[store.Tx]map[string][]string
	// arrays lends the buffers new snapshots' documents are joined in (joinArray), which the
	// store keeps nothing of: half a megabyte a 1,000-artifact snapshot otherwise allocates.
	arrays sync.Pool
}

// latestSnapshot is one environment's latest snapshot as written. Its slices are never
// modified once it is put: a snapshot built from it copies what it changes.
type latestSnapshot struct {
	taken   time.Time // when its artifacts not carried over were read from the store
	index   int
	digest  []byte
	running []snapshot.Running // the running set, as runningSet would read it back
	arts    []SnapshotArtifact // in running's order
	docs    [][]byte           // arts[i] as JSON
}

// latestArtifactBudget bounds the artifacts kept, over all environments: an artifact takes
// about 0.7 KB (its JSON, provenance and instances; measured with a small provenance) to 2.5 KB
// (a long one, with instance contexts), so the budget holds at most about 40 MB. An environment
// larger than the budget is not kept.
const latestArtifactBudget = 16 << 10

// latestMaxAge bounds how long artifacts are carried over from snapshot to snapshot: an
// environment's next snapshot after that takes every artifact anew. The marks keep carried
// artifacts current; this bounds the staleness of a change that no mark recorded, as when
// evaluators of a build before the marks ran beside this one during a rolling upgrade.
const latestMaxAge = 10 * time.Minute

func newLatestSnapshots(budget int) *latestSnapshots {
	return &latestSnapshots{byEnv: newWeightedLRU(budget, func(s *latestSnapshot) int { return max(len(s.arts), 1) }),
		now: time.Now, staged: map[store.Tx]map[string]*latestSnapshot{}, startedInTx: map[store.Tx]map[string][]string{}}
}

// get answers env's latest snapshot as tx sees it if it is the one at index with digest.
func (l *latestSnapshots) get(tx store.Tx, envID string, index int, digest []byte) (*latestSnapshot, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.staged[tx][envID]
	if !ok {
		s, ok = l.byEnv.Get(envID)
	}
	if !ok || s.index != index || !bytes.Equal(s.digest, digest) || l.now().Sub(s.taken) > latestMaxAge {
		return nil, false
	}
	return s, true
}

// stage keeps s as env's latest snapshot for the rest of tx, and for everyone once tx commits,
// and started as the fingerprints tx's snapshots of env started and s still runs.
func (l *latestSnapshots) stage(tx store.Tx, envID string, s *latestSnapshot, started []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.staged[tx] == nil {
		l.staged[tx] = map[string]*latestSnapshot{}
		l.startedInTx[tx] = map[string][]string{}
		tx.OnCommit(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			for env, s := range l.staged[tx] {
				l.byEnv.Put(env, s)
			}
			delete(l.staged, tx)
			delete(l.startedInTx, tx)
		})
		tx.OnRollback(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(l.staged, tx)
			delete(l.startedInTx, tx)
		})
	}
	l.staged[tx][envID] = s
	l.startedInTx[tx][envID] = started
}

// startedEarlier answers the fingerprints that snapshots of env written earlier in tx started
// and the latest of them still runs.
func (l *latestSnapshots) startedEarlier(tx store.Tx, envID string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.startedInTx[tx][envID]
}
