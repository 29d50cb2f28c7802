package sqlstore_test

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// runningChanges answers env-1's marks as a snapshot reads them.
func runningChanges(t *testing.T, s *sqlstore.Store) []store.RunningChange {
	t.Helper()
	var out []store.RunningChange
	err := s.Update(context.Background(), func(tx store.Tx) error {
		var err error
		out, err = tx.RunningChanges(context.Background(), "env-1")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func setRunning(t *testing.T, s *sqlstore.Store, fps ...string) {
	t.Helper()
	started := make([]store.Running, len(fps))
	for i, fp := range fps {
		started[i] = store.Running{Fingerprint: fp, Name: "app-" + fp, Since: 1}
	}
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		return tx.SetRunning(context.Background(), "org-a", "env-1", nil, started)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresMarkBesideStart: a change marked in every environment while the snapshot that
// starts its artifact is in flight marks that environment once both committed. Marked in the
// change's own transaction, the running index it read did not hold the artifact yet.
func TestPostgresMarkBesideStart(t *testing.T) {
	s, _, _ := openLockStore(t)
	ctx := context.Background()
	held, release := make(chan struct{}), make(chan struct{})
	change := hold(ctx, s, func(tx store.Tx) error { return tx.MarkRunningChanged(ctx, "org-a", "", []string{"f1"}) }, held, release, nil)
	<-held
	setRunning(t, s, "f1") // the snapshot that starts f1 commits first
	close(release)
	if err := <-change; err != nil {
		t.Fatal(err)
	}
	marks := runningChanges(t, s)
	if len(marks) != 1 || marks[0].Fingerprint != "f1" || marks[0].ID == 0 {
		t.Fatalf("marks of env-1: %+v, want f1 marked (with an ID)", marks)
	}
}

// TestPostgresNoticesReadAsMarks: changes whose environments were not marked after they
// committed (the process stopped between) are read as marks of no ID by every snapshot of an
// environment where their artifacts run, which cannot clear them; the next change marks them.
// A change names a fingerprint, or a flow for the artifacts it reported.
func TestPostgresNoticesReadAsMarks(t *testing.T) {
	s, _, _ := openLockStore(t, "tr-1")
	ctx := context.Background()
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.InsertArtifact(ctx, store.Artifact{ID: "a-f3", OrgID: "org-a", FlowID: "flow-1", TrailID: "tr-1",
			Fingerprint: "f3", Report: []byte(`{}`), CreatedAt: 1})
	}); err != nil {
		t.Fatal(err)
	}
	setRunning(t, s, "f1", "f3", "f4") // f4 is of no flow
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO change_notices (org_id, fingerprint, flow_id)
		VALUES ('org-a', 'f1', ''), ('org-b', 'f1', ''), ('org-a', '', 'flow-1'), ('org-b', '', 'flow-1')`); err != nil {
		t.Fatal(err)
	}
	want := []store.RunningChange{{ID: 0, Fingerprint: "f1"}, {ID: 0, Fingerprint: "f3"}}
	for range 2 {
		marks := runningChanges(t, s)
		slices.SortFunc(marks, func(a, b store.RunningChange) int { return strings.Compare(a.Fingerprint, b.Fingerprint) })
		if !slices.Equal(marks, want) {
			t.Fatalf("marks of env-1: %+v, want the notices of f1 and of f3's flow (of org-a only)", marks)
		}
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.ClearRunningChanges(ctx, []int64{0, 0}) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.MarkRunningChanged(ctx, "org-a", "", []string{"f2"}) }); err != nil {
		t.Fatal(err)
	}
	marks := runningChanges(t, s)
	slices.SortFunc(marks, func(a, b store.RunningChange) int { return strings.Compare(a.Fingerprint, b.Fingerprint) })
	if len(marks) != 2 || marks[0].Fingerprint != "f1" || marks[1].Fingerprint != "f3" || marks[0].ID == 0 || marks[1].ID == 0 {
		t.Fatalf("marks of env-1 after the next change: %+v, want f1 and f3 marked (with IDs)", marks)
	}
	var left int
	if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM change_notices`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d notices left (%v), want none", left, err)
	}
}

// TestPostgresAwaitTransactionsInFlight: the wait ends only once a transaction that had
// written when it began has ended.
func TestPostgresAwaitTransactionsInFlight(t *testing.T) {
	s, _, _ := openLockStore(t)
	ctx := context.Background()
	if !s.ConcurrentWriters() {
		t.Fatal("PostgreSQL's writers are concurrent")
	}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// A failure must not leave the transaction open: it would hold back every wait after it.
	defer once.Do(func() { close(release) })
	// A row written: the transaction has an ID.
	change := hold(ctx, s, func(tx store.Tx) error {
		return tx.SetRunning(ctx, "org-a", "env-1", nil, []store.Running{{Fingerprint: "f1", Name: "app", Since: 1}})
	}, held, release, nil)
	<-held
	before := s.Statements()
	awaited := make(chan error, 1)
	go func() { awaited <- s.AwaitTransactionsInFlight(ctx) }()
	for s.Statements() < before+3 { // the horizon, then two looks that found the transaction running
		select {
		case err := <-awaited:
			t.Fatalf("the wait ended (%v) while a transaction of before it was in flight", err)
		default:
			runtime.Gosched()
		}
	}
	once.Do(func() { close(release) })
	if err := <-change; err != nil {
		t.Fatal(err)
	}
	if err := <-awaited; err != nil {
		t.Fatal(err)
	}
}
