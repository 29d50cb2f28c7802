package evaluate

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/veritrail/veritrail/internal/bus/batch"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/pgtest"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
	"github.com/veritrail/veritrail/internal/store/sqlstore/sqlitetest"
)

// logRecords keeps what the evaluator logs, to check what the operator is told.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// errors answers the error records whose message contains msg, each as its attributes.
func (l *logRecords) errors(msg string) []map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]string
	for _, r := range l.recs {
		if r.Level != slog.LevelError || !strings.Contains(r.Message, msg) {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, attrs)
	}
	return out
}

// rejected lists every rejected message of the store, oldest first.
func (f *fixture) rejected() []store.RejectedMessage {
	f.t.Helper()
	list, _, err := f.st.ListRejected(context.Background(), store.RejectedFilter{OldestFirst: true})
	if err != nil {
		f.t.Fatal(err)
	}
	return list
}

func (f *fixture) attestationNames(trailID string) []string {
	f.t.Helper()
	atts, err := f.st.TrailAttestations(context.Background(), trailID)
	if err != nil {
		f.t.Fatal(err)
	}
	var names []string
	for _, a := range atts {
		names = append(names, a.Name)
	}
	return names
}

// requestReplay asks for the replay of id as an admin does.
func (f *fixture) requestReplay(id string) store.RejectedMessage {
	f.t.Helper()
	var m store.RejectedMessage
	err := f.st.UpdateIdentities(context.Background(), func(tx store.IdentityTx) error {
		var err error
		m, err = tx.RequestReplay(context.Background(), "", id, 2000)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// TestUndecodableMessageIsRejected: a payload that is no envelope is set aside as it came, under
// its bus ID and organization, instead of being dropped; a redelivery records nothing new.
func TestUndecodableMessageIsRejected(t *testing.T) {
	logs := &logRecords{}
	f := newFixtureOn(t, sqlitetest.Open(t), Config{}, slog.New(logs))
	garbage := []byte("{\"id\": \"m-x\", \"kind\": \x00\xff not json")
	m := message.NewMessage("bus-id-1", garbage)
	m.Metadata.Set(contract.MetaOrg, "org-1")
	m.Metadata.Set(contract.MetaKind, string(contract.KindAttestationReported))
	m.Metadata.Set(contract.MetaPartitionKey, "org-1/flow-1/t1")
	good := f.attestation("tests", true)
	for range 2 { // the second time is a redelivery of both
		if n, err := f.ev.HandleBatch(context.Background(), []*message.Message{m.Copy(), good.Copy()}); err != nil || n != 2 {
			t.Fatalf("HandleBatch = %d, %v; want 2, nil", n, err)
		}
	}
	got := f.rejected()
	if len(got) != 1 {
		t.Fatalf("%d rejected messages, want 1: %+v", len(got), got)
	}
	r := got[0]
	if r.ID != "bus-id-1" || r.OrgID != "org-1" || r.Kind != string(contract.KindAttestationReported) ||
		r.PartitionKey != "org-1/flow-1/t1" || r.Class != store.ClassPermanent || r.State != store.StateRejected ||
		!strings.Contains(r.Reason, "decode envelope") || !bytes.Equal(r.Payload, garbage) {
		t.Errorf("rejected message = %+v", r)
	}
	if names := f.attestationNames("trail-1"); len(names) != 1 || names[0] != "tests" {
		t.Errorf("attestations %v, want [tests]: the message behind the bad one applies", names)
	}
	if ok, err := f.st.Visible(context.Background(), []string{"bus-id-1"}); err != nil || !ok {
		t.Errorf("the rejected message is not marked applied: %v %v", ok, err)
	}
	if logged := logs.errors("rejected"); len(logged) != 1 || logged[0]["id"] != "bus-id-1" || logged[0]["org"] != "org-1" ||
		logged[0]["kind"] != string(contract.KindAttestationReported) || logged[0]["reason"] == "" {
		t.Errorf("error logs about the rejection = %v, want one with org, id, kind and reason", logged)
	}
}

// TestStoreRefusalIsRejected: a message the store refuses (here SQLite: a second attestation
// with an existing attestation's ID violates a UNIQUE constraint) is set aside with the store's
// reason, and the messages of its batch before and after it apply.
func TestStoreRefusalIsRejected(t *testing.T) {
	logs := &logRecords{}
	f := newFixtureOn(t, sqlitetest.Open(t), Config{}, slog.New(logs))
	first := f.attestation("tests", true)
	dup := f.env(contract.KindAttestationReported, func(e *contract.Envelope) {
		e.Attestation = &contract.AttestationInput{ID: "att-" + first.UUID, FlowID: "flow-1", TrailName: "t1", Name: "dup",
			Type: "generic", IsCompliant: true, Data: json.RawMessage(`{}`)}
		e.Request = &contract.Request{Operation: "attest_generic", Target: "/attestations/acme/app/trail/t1/generic"}
	})
	last := f.attestation("lint", true)
	batch := []*message.Message{first, dup, last}
	for range 2 {
		if n, err := f.ev.HandleBatch(context.Background(), batch); err != nil || n != len(batch) {
			t.Fatalf("HandleBatch = %d, %v; want %d, nil (the refused message must not block the others)", n, err, len(batch))
		}
	}
	if names := f.attestationNames("trail-1"); strings.Join(names, ",") != "tests,lint" {
		t.Fatalf("attestations %v, want [tests lint]", names)
	}
	got := f.rejected()
	if len(got) != 1 || got[0].ID != dup.UUID || got[0].Class != store.ClassPermanent || !strings.Contains(got[0].Reason, "conflict") ||
		got[0].PartitionKey != "org-1/flow-1/t1" || !bytes.Equal(got[0].Payload, dup.Payload) {
		t.Fatalf("rejected messages = %+v, want %s with the store's reason", got, dup.UUID)
	}
	recs, _, err := f.st.ListAudit(context.Background(), "org-1", store.AuditFilter{})
	if err != nil || len(recs) != 1 || recs[0].ID != dup.UUID || recs[0].Outcome != store.AuditRejected {
		t.Errorf("audit = %+v, %v; want the refused message recorded as rejected", recs, err)
	}
	if logged := logs.errors("rejected"); len(logged) != 1 || logged[0]["id"] != dup.UUID {
		t.Errorf("error logs about the rejection = %v, want exactly one (not one per delivery)", logged)
	}
}

// failingStore fails what its hooks say and is the store otherwise.
type failingStore struct {
	store.Store
	// update, when set, runs before each Update and fails it with what it returns.
	update func(call int) error
	calls  atomic.Int32
	// insert, when set, runs before every InsertAttestations and fails it with what it returns.
	insert func() error
}

func (s *failingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	n := int(s.calls.Add(1))
	if s.update != nil {
		if err := s.update(n); err != nil {
			return err
		}
	}
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(&failingTx{Tx: tx, s: s}) })
}

type failingTx struct {
	store.Tx
	s *failingStore
}

func (t *failingTx) InsertAttestations(ctx context.Context, as []store.Attestation) error {
	if t.s.insert != nil {
		if err := t.s.insert(); err != nil {
			return err
		}
	}
	return t.Tx.InsertAttestations(ctx, as)
}

// consume runs msgs through the batching consumer the evaluate tier uses, until each is acked,
// and fails if one is nacked.
func consume(t *testing.T, ev *Evaluator, msgs ...*message.Message) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan *message.Message, len(msgs))
	for _, m := range msgs {
		ch <- m
	}
	done := make(chan struct{})
	go func() {
		batch.Consume(ctx, ch, batch.Config{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond}, ev.HandleBatch,
			slog.New(slog.DiscardHandler))
		close(done)
	}()
	for _, m := range msgs {
		select {
		case <-m.Acked():
		case <-m.Nacked():
			t.Fatalf("message %s was nacked", m.UUID)
		case <-time.After(30 * time.Second):
			t.Fatalf("message %s was neither acked nor nacked", m.UUID)
		}
	}
	cancel()
	<-done
}

// TestTransientErrorsAreRetried: errors of the transient class (a serialization failure, a
// backend shut down by an administrator) are retried until the message applies, once, and
// nothing is set aside.
func TestTransientErrorsAreRetried(t *testing.T) {
	for _, code := range []string{"40001", "57P01", "40P01"} {
		t.Run(code, func(t *testing.T) {
			fs := &failingStore{Store: sqlitetest.Open(t)}
			f := newFixtureOn(t, fs, Config{RetryInterval: time.Millisecond}, nil)
			var calls atomic.Int32
			fs.insert = func() error {
				if calls.Add(1) <= 8 { // more than the consumer's retries in place: the batch goes back to the bus once
					return fmt.Errorf("sqlstore: insert attestations: %w", &pgconn.PgError{Code: code, Message: "injected"})
				}
				return nil
			}
			m := f.attestation("tests", true)
			var err error
			for range 3 { // the consumer's round, then the bus's redeliveries
				if err = f.ev.Handle(m); err == nil {
					break
				}
			}
			if err == nil {
				t.Fatal("Handle succeeded while the store failed; the injected error was not seen")
			}
			consume(t, f.ev, m.Copy())
			if names := f.attestationNames("trail-1"); len(names) != 1 {
				t.Fatalf("attestations %v, want exactly one", names)
			}
			if got := f.rejected(); len(got) != 0 {
				t.Fatalf("a transient failure was set aside: %+v", got)
			}
		})
	}
}

// TestConflictRace: a unique key taken by a transaction that committed meanwhile fails one
// attempt; the next applies the message, which is not set aside.
func TestConflictRace(t *testing.T) {
	fs := &failingStore{Store: sqlitetest.Open(t)}
	f := newFixtureOn(t, fs, Config{RetryInterval: time.Millisecond}, nil)
	var calls atomic.Int32
	fs.insert = func() error {
		if calls.Add(1) == 1 {
			return fmt.Errorf("sqlstore: insert attestations: %w", store.ErrConflict)
		}
		return nil
	}
	if err := f.ev.Handle(f.attestation("tests", true)); err != nil {
		t.Fatal(err)
	}
	if names := f.attestationNames("trail-1"); len(names) != 1 {
		t.Fatalf("attestations %v, want one", names)
	}
	if got := f.rejected(); len(got) != 0 {
		t.Fatalf("set aside after one conflict: %+v", got)
	}
}

// TestUnknownErrors: an error of no known class is retried UnknownAttempts times; then, while
// the store commits other transactions, the message is set aside with class unknown, and while
// the store fails everything, it is not.
func TestUnknownErrors(t *testing.T) {
	t.Run("the message fails", func(t *testing.T) {
		fs := &failingStore{Store: sqlitetest.Open(t)}
		f := newFixtureOn(t, fs, Config{RetryInterval: time.Millisecond, UnknownAttempts: 3}, nil)
		var tries atomic.Int32
		fs.insert = func() error {
			tries.Add(1)
			return errors.New("something odd")
		}
		m := f.attestation("tests", true)
		if err := f.ev.Handle(m); err != nil {
			t.Fatalf("Handle = %v, want nil (set aside)", err)
		}
		if n := tries.Load(); n != 3 {
			t.Errorf("tried %d times, want 3", n)
		}
		if got := f.rejected(); len(got) != 1 || got[0].ID != m.UUID || got[0].Class != store.ClassUnknown ||
			!strings.Contains(got[0].Reason, "something odd") {
			t.Fatalf("rejected messages = %+v, want %s with class unknown", got, m.UUID)
		}
	})
	t.Run("the store fails", func(t *testing.T) {
		fs := &failingStore{Store: sqlitetest.Open(t)}
		f := newFixtureOn(t, fs, Config{RetryInterval: time.Millisecond, UnknownAttempts: 3}, nil)
		fs.update = func(int) error { return errors.New("something odd") }
		if err := f.ev.Handle(f.attestation("tests", true)); err == nil {
			t.Fatal("Handle = nil while the store fails every transaction, want the error (retry, not set aside)")
		}
		fs.update = nil
		if got := f.rejected(); len(got) != 0 {
			t.Fatalf("set aside while the store failed: %+v", got)
		}
	})
	t.Run("the apply code panics", func(t *testing.T) {
		fs := &failingStore{Store: sqlitetest.Open(t)}
		f := newFixtureOn(t, fs, Config{RetryInterval: time.Millisecond, UnknownAttempts: 2}, nil)
		fs.insert = func() error { panic("boom") }
		m := f.attestation("tests", true)
		if err := f.ev.Handle(m); err != nil {
			t.Fatalf("Handle = %v, want nil (set aside)", err)
		}
		if got := f.rejected(); len(got) != 1 || got[0].Class != store.ClassUnknown || !strings.Contains(got[0].Reason, "boom") {
			t.Fatalf("rejected messages = %+v", got)
		}
	})
}

// TestReplayAfterFix: a trail begun for a flow that did not exist yet is rejected; once the
// flow exists, a replay applies it once, marks its audit record applied, and asking again
// (or two evaluators at once) changes nothing.
func TestReplayAfterFix(t *testing.T) {
	testReplayAfterFix(t, sqlitetest.Open(t))
}

func testReplayAfterFix(t *testing.T, st store.Store) {
	logs := &logRecords{}
	f := newFixtureOn(t, st, Config{}, slog.New(logs))
	ctx := context.Background()
	begin := f.env(contract.KindTrailBegun, func(e *contract.Envelope) {
		e.Trail = &contract.TrailBegin{ID: "trail-late", FlowID: "flow-late", Name: "t1"}
		e.Request = &contract.Request{Operation: "beginTrail", Target: "/trails/acme/late"}
	})
	f.handle(begin)
	if got := f.rejected(); len(got) != 1 || !strings.Contains(got[0].Reason, "not found") {
		t.Fatalf("rejected messages = %+v, want the trail begun for a missing flow", got)
	}

	// Replayed before the fix, it fails again with the new reason.
	f.requestReplay(begin.UUID)
	if n, err := f.ev.Replay(ctx); err != nil || n != 0 {
		t.Fatalf("Replay before the fix = %d, %v; want 0, nil", n, err)
	}
	if r, _ := f.st.RejectedMessage(ctx, "", begin.UUID); r.State != store.StateRejected || r.RejectedAt < 2000 {
		t.Fatalf("after a failed replay: %+v, want rejected again", r)
	}
	if logged := logs.errors("rejected again"); len(logged) != 1 || logged[0]["id"] != begin.UUID {
		t.Errorf("error logs about the failed replay = %v", logged)
	}

	tmpl := f.trail().TemplateID
	content, err := f.st.Template(ctx, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	f.handle(f.env(contract.KindFlowUpserted, func(e *contract.Envelope) {
		e.Flow = &contract.FlowUpsert{ID: "flow-late", Name: "late", Visibility: "private", Template: content, TemplateID: tmpl}
	}))
	stale := f.requestReplay(begin.UUID) // as a second evaluator may have listed it
	// Two evaluators replay at once: one applies it.
	other, err := New(Config{}, Deps{Store: f.st, Engine: f.ev.d.Engine})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var applied atomic.Int32
	for _, ev := range []*Evaluator{f.ev, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := ev.Replay(ctx)
			if err != nil {
				t.Errorf("Replay: %v", err)
			}
			applied.Add(int32(n))
		}()
	}
	wg.Wait()
	if n := applied.Load(); n != 1 {
		t.Fatalf("%d replays applied, want 1", n)
	}
	tr, err := f.st.TrailByName(ctx, "flow-late", "t1")
	if err != nil {
		t.Fatalf("the replayed trail: %v", err)
	}
	check := func(when string) {
		events, err := f.st.TrailEvents(ctx, tr.ID)
		if err != nil || len(events) != 1 {
			t.Fatalf("%s: %d trail events (%v), want 1", when, len(events), err)
		}
		r, err := f.st.RejectedMessage(ctx, "", begin.UUID)
		if err != nil || r.State != store.StateReplayed || r.ReplayedAt == 0 {
			t.Fatalf("%s: %+v, %v; want replayed", when, r, err)
		}
	}
	check("after the replay")
	// An evaluator that listed the request before the replay committed finds nothing to claim.
	if ok, err := other.replay(ctx, stale); err != nil || ok {
		t.Fatalf("a replay of a request listed before the replay = %v, %v; want false, nil", ok, err)
	}
	check("after a late evaluator")
	recs, _, err := f.st.ListAudit(ctx, "org-1", store.AuditFilter{})
	if err != nil || len(recs) != 1 || recs[0].Outcome != store.AuditApplied {
		t.Errorf("audit = %+v, %v; want the replayed message applied", recs, err)
	}
	if dirty, err := f.st.DirtyTrails(ctx); err != nil || !slices.Contains(dirty, tr.ID) {
		t.Errorf("dirty trails after the replay = %v, %v; want the new trail among them, to be evaluated", dirty, err)
	}

	// Asking again, and a redelivery of the original message, change nothing.
	if r := f.requestReplay(begin.UUID); r.State != store.StateReplayed {
		t.Fatalf("a replayed message asked again is %s", r.State)
	}
	if n, err := f.ev.Replay(ctx); err != nil || n != 0 {
		t.Fatalf("Replay after replayed = %d, %v", n, err)
	}
	f.handle(begin.Copy())
	check("after asking again and a redelivery")
}

// TestCleanText: what a rejection records beside the payload is storable text.
func TestCleanText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                 "plain",
		"tab\tand\nnewline":     "tab\tand\nnewline",
		"nul\x00name":           `nul\x00name`,
		"bad \xff utf-8":        "bad \uFFFD utf-8",
		"escape \x1b[31m":       `escape \x1b[31m`,
		strings.Repeat("a", 40): strings.Repeat("a", 6) + "…(34 more bytes)",
	} {
		if got := clean(in, 30); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}

// openPostgres opens the store in a new schema of VERITRAIL_TEST_POSTGRES (or the local server),
// under an application name of its own (so that the test can find its connections), dropped
// afterwards. It fails under CI when there is no server, and skips otherwise.
func openPostgres(t *testing.T) (st *sqlstore.Store, admin *sql.DB, app string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	schema := fmt.Sprintf("vt_evaluate_%d", rand.Uint64()>>1)
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	st, err = sqlstore.OpenPostgres(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, admin, schema
}

// TestPostgresRejectsNUL: PostgreSQL refuses a NUL in text; the attestation that carries one
// is set aside with PostgreSQL's reason, and the messages of its batch and partition after it
// apply.
func TestPostgresRejectsNUL(t *testing.T) {
	st, _, _ := openPostgres(t)
	f := newFixtureOn(t, st, Config{}, nil)
	bad := f.attestation("nul\x00name", true)
	msgs := []*message.Message{f.attestation("tests", true), bad, f.attestation("lint", true)}
	consume(t, f.ev, msgs...)
	if names := f.attestationNames("trail-1"); strings.Join(names, ",") != "tests,lint" {
		t.Fatalf("attestations %v, want [tests lint]", names)
	}
	got := f.rejected()
	if len(got) != 1 || got[0].ID != bad.UUID || got[0].Class != store.ClassPermanent ||
		!strings.Contains(got[0].Reason, "invalid byte sequence") || !bytes.Equal(got[0].Payload, bad.Payload) {
		t.Fatalf("rejected messages = %+v, want %s with PostgreSQL's reason", got, bad.UUID)
	}
}

// TestPostgresReplayAfterFix is TestReplayAfterFix on PostgreSQL, where two evaluators really
// claim at once.
func TestPostgresReplayAfterFix(t *testing.T) {
	st, _, _ := openPostgres(t)
	testReplayAfterFix(t, st)
}

// TestPostgresBackendsTerminated: the store's connections are terminated (pg_terminate_backend)
// in the middle of applying a batch, twice; the consumer retries and every message applies
// once, none set aside.
func TestPostgresBackendsTerminated(t *testing.T) {
	st, admin, app := openPostgres(t)
	fs := &failingStore{Store: st}
	f := newFixtureOn(t, fs, Config{RetryInterval: time.Millisecond}, nil)
	var terminated atomic.Int32
	fs.insert = func() error {
		if terminated.Add(1) > 2 {
			return nil
		}
		// From another connection, while this transaction is open: its insert fails.
		_, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
		return err
	}
	msgs := []*message.Message{f.attestation("tests", true), f.attestation("lint", true), f.attestation("sbom", true)}
	consume(t, f.ev, msgs...)
	if n := terminated.Load(); n < 3 {
		t.Fatalf("the backends were terminated %d times, want the batch to have run into it twice", n)
	}
	if names := f.attestationNames("trail-1"); strings.Join(names, ",") != "tests,lint,sbom" {
		t.Fatalf("attestations %v, want each once", names)
	}
	if got := f.rejected(); len(got) != 0 {
		t.Fatalf("set aside after terminated backends: %+v", got)
	}
}
