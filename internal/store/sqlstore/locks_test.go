package sqlstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// openLockStore opens a PostgreSQL store in a fresh schema with one flow, the trails trailIDs
// and the environment env-1.
// Its connections carry the application name lockApp(schema), which waitForLockWaiter looks for.
func openLockStore(t *testing.T, trailIDs ...string) (*sqlstore.Store, *sql.DB, string) {
	t.Helper()
	dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultPostgres
	}
	admin := connectPostgres(t, dsn)
	schema := createSchema(t, admin)
	app := "vt_locks_" + schema
	dsn = withParam(withSearchPath(dsn, schema), "application_name", app)
	ctx := context.Background()
	s, err := sqlstore.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.CreateOrg(ctx, store.Org{ID: "org-a", Name: "acme", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutTemplate(ctx, "tpl", "version: 1\n"); err != nil {
			return err
		}
		if _, err := tx.UpsertFlow(ctx, store.Flow{ID: "flow-1", OrgID: "org-a", Name: "app", TemplateID: "tpl",
			Tags: map[string]string{}, CreatedAt: 1, LastModifiedAt: 1}); err != nil {
			return err
		}
		for _, id := range trailIDs {
			if _, err := tx.UpsertTrail(ctx, store.Trail{ID: id, OrgID: "org-a", FlowID: "flow-1", Name: id, TemplateID: "tpl",
				CreatedAt: 1, LastModifiedAt: 1}); err != nil {
				return err
			}
		}
		_, err := tx.UpsertEnvironment(ctx, store.Environment{ID: "env-1", OrgID: "org-a", Name: "prod", Type: "K8S",
			Tags: map[string]string{}, CreatedAt: 1, LastModifiedAt: 1})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, admin, app
}

// withParam adds a run-time parameter to a URL DSN.
func withParam(dsn, key, value string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// hold runs a transaction that does first, signals held, waits for release and then does then.
func hold(ctx context.Context, s *sqlstore.Store, first func(store.Tx) error, held chan<- struct{}, release <-chan struct{},
	then func(store.Tx) error) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- s.Update(ctx, func(tx store.Tx) error {
			if err := first(tx); err != nil {
				return err
			}
			close(held)
			<-release
			if then != nil {
				return then(tx)
			}
			return nil
		})
	}()
	return done
}

// TestPostgresLockTrailsSkipsHeld: saving an evaluation never waits for a trail an apply holds;
// LockTrails answers only the trails it could lock.
func TestPostgresLockTrailsSkipsHeld(t *testing.T) {
	ctx := context.Background()
	s, _, _ := openLockStore(t, "trail-1", "trail-2")
	held, release := make(chan struct{}), make(chan struct{})
	apply := hold(ctx, s, func(tx store.Tx) error {
		return tx.HoldTrails(ctx, []string{"trail-1"}) // as an apply of attestations does
	}, held, release, nil)
	<-held
	var got map[string]int64
	bounded, cancel := context.WithTimeout(ctx, time.Minute) // a LockTrails that waited would wait for good
	defer cancel()
	err := s.Update(bounded, func(tx store.Tx) error {
		var err error
		got, err = tx.LockTrails(bounded, []string{"trail-2", "trail-1"})
		return err
	})
	close(release)
	if err != nil {
		t.Fatalf("LockTrails beside a transaction holding trail-1: %v", err)
	}
	if ids := slices.Sorted(maps.Keys(got)); !reflect.DeepEqual(ids, []string{"trail-2"}) {
		t.Errorf("LockTrails = %v, want [trail-2] (trail-1 is held)", ids)
	}
	if err := <-apply; err != nil {
		t.Fatal(err)
	}
}

// TestPostgresGiveWayBreaksCycle is the evaluator's deadlock: an apply holds an environment (a
// snapshot earlier in its batch) and then holds a trail, while a save holds that trail and
// judges the environment. The save gives way: it fails with store.ErrBusy and the apply
// commits, with no deadlock for PostgreSQL to detect.
func TestPostgresGiveWayBreaksCycle(t *testing.T) {
	ctx := context.Background()
	s, admin, app := openLockStore(t, "trail-1")
	envHeld, saveHasTrail := make(chan struct{}), make(chan struct{})
	apply := hold(ctx, s, func(tx store.Tx) error {
		return tx.LockEnvironment(ctx, "env-1")
	}, envHeld, saveHasTrail, func(tx store.Tx) error {
		return tx.HoldTrails(ctx, []string{"trail-1"}) // waits for the save
	})
	<-envHeld
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.GiveWay(ctx); err != nil {
			return err
		}
		locked, err := tx.LockTrails(ctx, []string{"trail-1"})
		if err != nil || len(locked) != 1 {
			return errors.Join(err, errors.New("the save did not get trail-1"))
		}
		close(saveHasTrail)
		// Let the apply reach its wait for trail-1 before this waits for env-1.
		if err := waitForLockWaiter(ctx, admin, app); err != nil {
			return err
		}
		return tx.LockEnvironment(ctx, "env-1")
	})
	if !errors.Is(err, store.ErrBusy) {
		t.Fatalf("save in a lock cycle: %v, want store.ErrBusy", err)
	}
	if err := <-apply; err != nil {
		t.Fatalf("apply after the save gave way: %v", err)
	}
}

// waitForLockWaiter waits until a backend named app waits for a lock.
func waitForLockWaiter(ctx context.Context, admin *sql.DB, app string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var n int
		err := admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1
			AND wait_event_type = 'Lock'`, app).Scan(&n)
		if err != nil || n > 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.New("no transaction came to wait for a lock")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestPostgresTouchTrailsInOrder: batches that touch or hold overlapping sets of trails at once
// (two evaluators applying the same partition during a rebalance) take the rows' locks in one
// order and never deadlock, whatever plan PostgreSQL picks for each set's size.
func TestPostgresTouchTrailsInOrder(t *testing.T) {
	t.Run("touch", func(t *testing.T) {
		lockOverlapping(t, func(ctx context.Context, tx store.Tx, at map[string]float64) error { return tx.TouchTrails(ctx, at) })
	})
	t.Run("hold", func(t *testing.T) {
		lockOverlapping(t, func(ctx context.Context, tx store.Tx, at map[string]float64) error {
			return tx.HoldTrails(ctx, slices.Collect(maps.Keys(at))) // in map order: HoldTrails sorts
		})
	})
}

// lockOverlapping runs two writers that each lock windows of 300 trails with lock, 150 times.
func lockOverlapping(t *testing.T, lock func(context.Context, store.Tx, map[string]float64) error) {
	var ids []string
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("tr-%03d", i))
	}
	s, _, _ := openLockStore(t, ids...)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 150 {
				// A window of the trails, of a size from a few to all of them, so that both
				// nested-loop and hash plans run against each other.
				n := 2 + rng.IntN(len(ids)-2)
				from := rng.IntN(len(ids) - n + 1)
				at := map[string]float64{}
				for _, id := range ids[from : from+n] {
					at[id] = float64(i)
				}
				if err := s.Update(ctx, func(tx store.Tx) error { return lock(ctx, tx, at) }); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("locking trails: %v", err)
	}
}

// TestPostgresSaveLeavesUnchangedArtifacts: saving a trail's evaluation writes its artifacts'
// states only where they changed. Every attestation to a trail evaluates it again, and an
// unchanged state written anyway was a new row version of the artifact each time.
func TestPostgresSaveLeavesUnchangedArtifacts(t *testing.T) {
	s, admin, app := openLockStore(t, "trail-1")
	schema := strings.TrimPrefix(app, "vt_locks_")
	ctx := context.Background()
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.InsertArtifact(ctx, store.Artifact{ID: "art-1", OrgID: "org-a", FlowID: "flow-1", TrailID: "trail-1",
			Fingerprint: strings.Repeat("a", 64), Filename: "app", Report: json.RawMessage(`{}`), CreatedAt: 2, State: "INCOMPLETE"})
	}); err != nil {
		t.Fatal(err)
	}
	version := func() string {
		t.Helper()
		var xmin, state string
		if err := admin.QueryRowContext(ctx, `SELECT xmin::text, state FROM `+schema+`.artifacts WHERE id = 'art-1'`).Scan(&xmin, &state); err != nil {
			t.Fatal(err)
		}
		return xmin + " " + state
	}
	save := func(state string) {
		t.Helper()
		if err := s.Update(ctx, func(tx store.Tx) error {
			return tx.SaveCompliances(ctx, []store.ComplianceSave{{TrailID: "trail-1", State: state, Doc: json.RawMessage(`{}`),
				At: 3, ModifiedAt: 2, ArtifactStates: map[string]string{"art-1": state}}})
		}); err != nil {
			t.Fatal(err)
		}
	}
	save("COMPLIANT")
	first := version()
	if !strings.HasSuffix(first, " COMPLIANT") {
		t.Fatalf("artifact after the first save: %s", first)
	}
	save("COMPLIANT")
	if again := version(); again != first {
		t.Errorf("saving the same state wrote the artifact again: %s, then %s", first, again)
	}
	save("NON-COMPLIANT")
	if changed := version(); !strings.HasSuffix(changed, " NON-COMPLIANT") || changed == first {
		t.Errorf("a changed state was not written: %s, then %s", first, changed)
	}
}

// keepUnanalysed turns autovacuum off for schema's table: no analysis may give it statistics
// behind the test's back.
func keepUnanalysed(t *testing.T, admin *sql.DB, schema, table string) {
	t.Helper()
	if _, err := admin.ExecContext(context.Background(), `ALTER TABLE `+schema+`.`+table+` SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
}

// analysed reports whether schema's table has statistics (ANALYZE or autovacuum ran on it).
func analysed(t *testing.T, admin *sql.DB, schema, table string) bool {
	t.Helper()
	var done bool
	if err := admin.QueryRowContext(context.Background(), `SELECT last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL
		FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2`, schema, table).Scan(&done); err != nil {
		t.Fatal(err)
	}
	return done
}

// TestPostgresFactsAfterWithoutStatistics: every trail evaluation reads its trail's attestations
// after a position. On a table PostgreSQL has no statistics of yet (a new deployment, until
// autovacuum analyses it), a plain join of the positions to attestations was planned as a hash
// join over a scan of every attestation; the query must read each trail's index range instead.
func TestPostgresFactsAfterWithoutStatistics(t *testing.T) {
	trails := make([]string, 40)
	for i := range trails {
		trails[i] = fmt.Sprintf("trail-%02d", i)
	}
	s, admin, app := openLockStore(t, trails...)
	schema := strings.TrimPrefix(app, "vt_locks_")
	ctx := context.Background()
	keepUnanalysed(t, admin, schema, "attestations")
	recs := make([]store.Attestation, 0, 4000)
	for i := range cap(recs) {
		recs = append(recs, store.Attestation{ID: fmt.Sprintf("att-%05d", i), OrgID: "org-a", FlowID: "flow-1", TrailID: trails[i%len(trails)],
			Name: "unit-tests", Type: "junit", IsCompliant: true, Data: json.RawMessage(`{}`), ReportedBy: "ci", CreatedAt: 2})
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.InsertAttestations(ctx, recs) }); err != nil {
		t.Fatal(err)
	}
	if analysed(t, admin, schema, "attestations") {
		t.Fatal("attestations was analysed: the test needs a table without statistics")
	}
	after := map[string]int64{}
	for _, id := range trails[:28] {
		after[id] = 50
	}
	if plan := sqlstore.FactsAfterPlan(t, s, after); strings.Contains(plan, "Seq Scan on attestations") {
		t.Errorf("the facts after a position scan every attestation:\n%s", plan)
	}
	got, _, err := s.TrailAttestationFactsAfter(ctx, after)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got["trail-00"]); n == 0 || n >= 100 {
		t.Errorf("trail-00 has %d attestations after position 50; want some of its 100, not all", n)
	}
}

// TestPostgresTrailIDsWithoutStatistics: every batch of attestations finds its trails by flow
// and name. Without statistics of trails, name IN (...) was planned as a scan of every trail of
// the flow (its flow_id index), filtered by name; each name must be a lookup on the (flow_id,
// name) key.
func TestPostgresTrailIDsWithoutStatistics(t *testing.T) {
	trails := make([]string, 1000)
	for i := range trails {
		trails[i] = fmt.Sprintf("trail-%04d", i)
	}
	s, admin, app := openLockStore(t, trails...)
	schema := strings.TrimPrefix(app, "vt_locks_")
	ctx := context.Background()
	keepUnanalysed(t, admin, schema, "trails")
	if analysed(t, admin, schema, "trails") {
		t.Skip("autovacuum analysed trails already: the test needs a table without statistics")
	}
	names := trails[100:164]
	if plan := sqlstore.TrailsNamedPlan(t, s, "flow-1", names); !strings.Contains(plan, "trails_flow_id_name_key") {
		t.Errorf("the trails of a batch are not looked up by flow and name:\n%s", plan)
	}
	keys := make([]store.TrailKey, 0, len(names)+1)
	for _, n := range names {
		keys = append(keys, store.TrailKey{FlowID: "flow-1", Name: n})
	}
	keys = append(keys, store.TrailKey{FlowID: "flow-1", Name: "no-such-trail"})
	ids, err := s.TrailIDs(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(names) || ids[store.TrailKey{FlowID: "flow-1", Name: "trail-0100"}] != "trail-0100" {
		t.Errorf("TrailIDs = %d trails, trail-0100 -> %q; want %d, itself", len(ids), ids[store.TrailKey{FlowID: "flow-1", Name: "trail-0100"}], len(names))
	}
}

// TestPostgresVisibleWithoutStatistics: a read after a write asks whether the messages it waits
// for are applied and evaluated. Without statistics of applied_messages, the IN list of their IDs
// was planned as a scan of the whole table, which holds a row for every message ever applied; each
// ID must be a lookup on its key.
func TestPostgresVisibleWithoutStatistics(t *testing.T) {
	s, admin, app := openLockStore(t, "trail-1")
	schema := strings.TrimPrefix(app, "vt_locks_")
	ctx := context.Background()
	keepUnanalysed(t, admin, schema, "applied_messages")
	marks := make([]store.AppliedMark, 5000)
	for i := range marks {
		marks[i] = store.AppliedMark{ID: fmt.Sprintf("msg-%05d", i), TrailID: "trail-1", At: 2}
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.MarkAppliedAll(ctx, marks) }); err != nil {
		t.Fatal(err)
	}
	if analysed(t, admin, schema, "applied_messages") {
		t.Fatal("applied_messages was analysed: the test needs a table without statistics")
	}
	ids := make([]string, 0, 256)
	for i := 0; i < len(marks) && len(ids) < cap(ids); i += 19 {
		ids = append(ids, marks[i].ID)
	}
	if plan := sqlstore.VisiblePlan(t, s, ids); strings.Contains(plan, "Seq Scan on applied_messages") {
		t.Errorf("a read-after-write check scans every applied message:\n%s", plan)
	}
	ok, err := s.Visible(ctx, ids)
	if err != nil || !ok {
		t.Errorf("Visible(%d applied messages of a clean trail) = %v, %v; want true", len(ids), ok, err)
	}
	if ok, err := s.Visible(ctx, append(ids, "msg-never")); err != nil || ok {
		t.Errorf("Visible with a message never applied = %v, %v; want false", ok, err)
	}
}
