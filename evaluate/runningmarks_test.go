package evaluate

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// TestPostgresChangeDuringStartIsSeen: a change of a running artifact's evidence that was being
// saved while a snapshot started the artifact shows in the snapshots after it commits. The
// saver (another evaluator, on PostgreSQL) looked for the environments where the artifact runs
// before the starting snapshot committed, so it marked none; the snapshot that started it read
// the evidence from before the change, and so did the one after it, while the change was still
// not committed. The fault harness saw this as a final snapshot showing a trail's old
// compliance.
func TestPostgresChangeDuringStartIsSeen(t *testing.T) {
	st, _, _ := openPostgres(t)
	ctx := context.Background()
	f := newEnvFixtureOn(t, st, 1) // artifact fp(0), reported in trail t1
	f.evaluateTrail(t, "t1")
	trail, err := st.TrailByName(ctx, "flow-1", "t1")
	if err != nil {
		t.Fatal(err)
	}
	f.handle(t, app0(1))
	f.handle(t, runningIn()) // app-0 stopped: the next report starts it again
	if _, arts := f.latest(t, "env-1"); len(arts) != 0 {
		t.Fatalf("%d artifacts run, want none", len(arts))
	}

	// The save: the trail turns non-compliant, and its artifact's environments are marked,
	// while app-0 runs nowhere yet. It commits only once two snapshots are applied.
	commit := f.saveBeside(t, trail.ID)
	f.handle(t, app0(1)) // starts app-0, reading the evidence from before the change
	f.handle(t, app0(2)) // takes app-0 anew, as started ones are, still before the change
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	f.handle(t, app0(3))
	a := f.latestApp0(t)
	if got := a.Flows[0].State; got != "NON_COMPLIANT" {
		t.Errorf("the latest snapshot shows app-0's trail %s, want NON_COMPLIANT (the change committed before it)", got)
	}
	if c := a.Compliant; c == nil || *c {
		t.Errorf("the latest snapshot shows app-0 compliant or unknown, want non-compliant")
	}
}

// TestPostgresChangeDuringBatchStartIsSeen: the same race when one batch applies two reports of
// the environment, the first starting the artifact and the second still running it, and the
// save commits (and marks where the running index says the artifact runs: nowhere yet) after
// both read the evidence and before the batch commits. The second snapshot read and cleared
// the first one's marks; the snapshot after the batch must take the artifact anew all the same.
func TestPostgresChangeDuringBatchStartIsSeen(t *testing.T) {
	st, _, _ := openPostgres(t)
	ctx := context.Background()
	f := newEnvFixtureOn(t, st, 1) // artifact fp(0), reported in trail t1
	f.evaluateTrail(t, "t1")
	trail, err := st.TrailByName(ctx, "flow-1", "t1")
	if err != nil {
		t.Fatal(err)
	}
	hooked := &beforeCommit{Store: st}
	if f.ev, err = New(Config{}, Deps{Store: hooked, Engine: f.ev.d.Engine}); err != nil {
		t.Fatal(err)
	}
	f.handle(t, runningIn()) // env-1's first snapshot: nothing runs

	commit := f.saveBeside(t, trail.ID)
	var committed error
	hooked.set(func() { committed = commit() })
	msgs := []*message.Message{f.message(t, app0(1)), f.message(t, app0(2))}
	if n, err := f.ev.HandleBatch(ctx, msgs); err != nil || n != len(msgs) {
		t.Fatalf("HandleBatch = %d, %v", n, err)
	}
	if committed != nil {
		t.Fatal(committed)
	}
	if hooked.set(nil) {
		t.Fatal("the batch did not run as one transaction: the save never committed inside it")
	}
	f.handle(t, app0(3))
	if got := f.latestApp0(t).Flows[0].State; got != "NON_COMPLIANT" {
		t.Errorf("the snapshot after the batch shows app-0's trail %s, want NON_COMPLIANT (the change committed before it)", got)
	}
}

// app0 fills a report of env-1 running instances of app-0 (fingerprint 0), each created at a
// moment of its own, so that each count is a new snapshot.
func app0(instances int) func(*contract.Envelope) {
	items := make([]contract.RunningInstance, instances)
	for i := range items {
		items[i] = contract.RunningInstance{Name: "app-0", Fingerprint: fp(0), CreationTimestamp: float64(1 + i)}
	}
	return runningIn(items...)
}

// latestApp0 is app-0 in env-1's latest snapshot, which must run it alone, with one trail.
func (f *envFixture) latestApp0(t *testing.T) SnapshotArtifact {
	t.Helper()
	_, arts := f.latest(t, "env-1")
	if len(arts) != 1 || len(arts[0].Flows) != 1 {
		t.Fatalf("latest snapshot: %+v, want app-0 with one trail", arts)
	}
	return arts[0]
}

// beforeCommit is a store whose next write transaction runs a hook once its work is done and
// before it commits.
type beforeCommit struct {
	store.Store
	mu   sync.Mutex
	hook func()
}

// set makes f the hook and reports whether one was pending.
func (b *beforeCommit) set(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	pending := b.hook != nil
	b.hook = f
	return pending
}

func (b *beforeCommit) Update(ctx context.Context, fn func(store.Tx) error) error {
	return b.Store.Update(ctx, func(tx store.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		b.mu.Lock()
		h := b.hook
		b.hook = nil
		b.mu.Unlock()
		if h != nil {
			h()
		}
		return nil
	})
}

// TestPostgresVerdictAfterConcurrentSave: the same race, in an environment with policies. The
// save judges the trail's artifact again where the running index says it runs, which is
// nowhere yet; the snapshot that starts it beside the save judges it from the evidence before
// the save. Once both committed, the verdict (which assert reads) follows the save.
func TestPostgresVerdictAfterConcurrentSave(t *testing.T) {
	st, _, _ := openPostgres(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newEnvFixtureOn(t, st, 1) // artifact fp(0), reported in trail t1
	f.evaluateTrail(t, "t1")
	f.policy(t, "trail", "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  trail-compliance:\n    required: true\n")
	f.attach(t, "env-1", false, "trail")
	runs := make(chan error, 1)
	go func() { runs <- f.ev.Run(ctx) }()
	defer func() { cancel(); <-runs }()
	heard := &heardChanges{listening: make(chan struct{})}
	go st.ListenChanges(ctx, heard, slog.New(slog.DiscardHandler))
	<-heard.listening
	trail, err := st.TrailByName(ctx, "flow-1", "t1")
	if err != nil {
		t.Fatal(err)
	}

	commit := f.saveBeside(t, trail.ID)
	f.handle(t, runningApps(0)) // starts app-0, judged from the evidence before the save
	if v := f.verdicts(t, "env-1"); !v["app-0"].Compliant {
		t.Fatalf("the snapshot beside the save judged app-0 %+v; the test needs it judged before the save", v["app-0"])
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); f.verdicts(t, "env-1")["app-0"].Compliant; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("app-0's verdict in env-1 is still compliant a minute after its trail's save committed")
		}
	}
	if got := f.state(t, "env-1"); got != "false/false" {
		t.Errorf("env-1 after the verdict: %s, want false/false", got)
	}
	// Ingest processes that keep assert answers drop app-0's: the judging announced it.
	for deadline := time.Now().Add(time.Minute); !heard.artifact("org-1", fp(0)); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no announcement named app-0 after its verdict changed")
		}
	}
}

// heardChanges records the artifacts of the announcements a store's listener hears.
type heardChanges struct {
	mu        sync.Mutex
	artifacts map[string][]string
	listening chan struct{} // closed once it listens
	once      sync.Once
}

func (h *heardChanges) Changed(_ []string, artifacts map[string][]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.artifacts == nil {
		h.artifacts = map[string][]string{}
	}
	for org, fps := range artifacts {
		h.artifacts[org] = append(h.artifacts[org], fps...)
	}
}

func (h *heardChanges) Listening(on bool) {
	if on {
		h.once.Do(func() { close(h.listening) })
	}
}

func (h *heardChanges) artifact(org, fp string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.artifacts[org], fp)
}

// saveBeside begins a save of trail trailID (artifact art-0, fp(0)) turning NON_COMPLIANT, as
// Evaluator.saveIn writes it: the compliance, the artifact judged again where the running index
// says it runs under policies, and the environments where it runs marked. The transaction stays
// open until commit, which answers its error (or the test ends: an open transaction would hold
// back every wait for the transactions in flight on the server).
func (f *envFixture) saveBeside(t *testing.T, trailID string) (commit func() error) {
	t.Helper()
	ctx := context.Background()
	marked, release, saved := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		saved <- f.st.Update(ctx, func(tx store.Tx) error {
			err := func() error {
				if err := tx.SaveCompliance(ctx, trailID, "NON_COMPLIANT", []byte(`{}`), 2000,
					map[string]string{"art-0": "NON_COMPLIANT"}); err != nil {
					return err
				}
				fps := map[string][]string{"org-1": {fp(0)}}
				if err := f.ev.policies.afterTrails(ctx, tx, fps, 2000); err != nil {
					return err
				}
				return tx.MarkRunningChanged(ctx, "org-1", "", fps["org-1"])
			}()
			close(marked)
			if err != nil {
				return err
			}
			<-release
			return nil
		})
	}()
	<-marked
	var once sync.Once
	commit = func() error {
		once.Do(func() { close(release) })
		return <-saved
	}
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	return commit
}

// TestPostgresJudgingAfterASnapshotReadsItsRunningSet: judging artifacts again (a trail's save,
// the re-judging after a snapshot) reads where they run, then locks each environment. A snapshot
// holding the lock may stop one of them meanwhile; judged from the rows read before the lock, the
// stopped artifact counted again and turned the environment back to non-compliant after the
// snapshot made it compliant (TestPolicyDecisionsFireComplianceTriggers saw the trigger).
func TestPostgresJudgingAfterASnapshotReadsItsRunningSet(t *testing.T) {
	st, admin, _ := openPostgres(t)
	ctx := context.Background()
	f := newEnvFixtureOn(t, st, 1) // fp(0) is reported; fp(5) is not, so it has no provenance
	f.policy(t, "provenance", "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  provenance:\n    required: true\n")
	f.attach(t, "env-1", false, "provenance")
	f.handle(t, runningApps(0, 5))
	if got := f.state(t, "env-1"); got != "false/false" {
		t.Fatalf("env-1 running an artifact without provenance: %s, want false/false", got)
	}

	// A snapshot that stops app-5 holds the environment while a judging of fp(5) begins.
	stop, err := contract.Unmarshal(f.message(t, runningApps(0)).Payload)
	if err != nil {
		t.Fatal(err)
	}
	locked, release, snapped := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		snapped <- st.Update(ctx, func(tx store.Tx) error {
			if err := tx.LockEnvironment(ctx, "env-1"); err != nil {
				return err
			}
			close(locked)
			<-release
			_, err := f.ev.applier.apply(ctx, tx, stop)
			return err
		})
	}()
	<-locked
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	judged := make(chan error, 1)
	go func() {
		judged <- st.Update(ctx, func(tx store.Tx) error {
			return f.ev.policies.afterTrails(ctx, tx, map[string][]string{"org-1": {fp(5)}}, 3000)
		})
	}()
	// The judging has read where fp(5) runs and waits for the environment.
	for waiting := 0; waiting == 0; time.Sleep(5 * time.Millisecond) {
		if err := admin.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE 'SELECT id FROM environments WHERE id = $1 FOR UPDATE%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	once.Do(func() { close(release) })
	if err := <-snapped; err != nil {
		t.Fatal(err)
	}
	if err := <-judged; err != nil {
		t.Fatal(err)
	}
	if got := f.state(t, "env-1"); got != "true/true" {
		t.Errorf("env-1 once app-5 stopped and fp(5) was judged again: %s, want true/true", got)
	}
}
