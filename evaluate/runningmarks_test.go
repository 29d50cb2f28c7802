package evaluate

import (
	"context"
	"testing"

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
	trail, err := st.TrailByName(ctx, "flow-1", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ev.EvaluateTrail(ctx, trail.ID); err != nil {
		t.Fatal(err)
	}
	app := func(instances int) func(*contract.Envelope) {
		items := make([]contract.RunningInstance, instances)
		for i := range items {
			items[i] = contract.RunningInstance{Name: "app-0", Fingerprint: fp(0), CreationTimestamp: float64(1 + i)}
		}
		return runningIn(items...)
	}
	f.handle(t, app(1))
	f.handle(t, runningIn()) // app-0 stopped: the next report starts it again
	if _, arts := f.latest(t, "env-1"); len(arts) != 0 {
		t.Fatalf("%d artifacts run, want none", len(arts))
	}

	// The saver: the trail turns non-compliant, and its artifact's environments are marked,
	// while app-0 runs nowhere yet. It commits only once two snapshots are applied.
	marked, release, saved := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		saved <- st.Update(ctx, func(tx store.Tx) error {
			if err := tx.SaveCompliance(ctx, trail.ID, "NON_COMPLIANT", []byte(`{}`), 2000,
				map[string]string{"art-0": "NON_COMPLIANT"}); err != nil {
				return err
			}
			if err := tx.MarkRunningChanged(ctx, "org-1", "", []string{fp(0)}); err != nil {
				return err
			}
			close(marked)
			<-release
			return nil
		})
	}()
	<-marked
	f.handle(t, app(1)) // starts app-0, reading the evidence from before the change
	f.handle(t, app(2)) // takes app-0 anew, as started ones are, still before the change
	close(release)
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	f.handle(t, app(3))
	_, arts := f.latest(t, "env-1")
	if len(arts) != 1 || len(arts[0].Flows) != 1 {
		t.Fatalf("latest snapshot: %+v, want app-0 with one trail", arts)
	}
	if got := arts[0].Flows[0].State; got != "NON_COMPLIANT" {
		t.Errorf("the latest snapshot shows app-0's trail %s, want NON_COMPLIANT (the change committed before it)", got)
	}
	if c := arts[0].Compliant; c == nil || *c {
		t.Errorf("the latest snapshot shows app-0 compliant or unknown, want non-compliant")
	}
}
