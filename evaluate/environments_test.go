package evaluate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/snapshot"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
	"github.com/veritrail/veritrail/internal/store/sqlstore/sqlitetest"
	"github.com/veritrail/veritrail/policies/template"
)

// envFixture is an evaluator on SQLite with one environment and n artifacts reported.
type envFixture struct {
	st  *sqlstore.Store
	ev  *Evaluator
	seq int
}

func newEnvFixture(tb testing.TB, artifacts int) *envFixture {
	tb.Helper()
	return newEnvFixtureOn(tb, sqlitetest.Open(tb), artifacts)
}

// newEnvFixtureOn is newEnvFixture on st.
func newEnvFixtureOn(tb testing.TB, st *sqlstore.Store, artifacts int) *envFixture {
	tb.Helper()
	ev, err := New(Config{}, Deps{Store: st, Engine: template.NewEngine(template.EngineOptions{})})
	if err != nil {
		tb.Fatal(err)
	}
	f := &envFixture{st: st, ev: ev}
	tmpl, _ := template.Parse(nil)
	f.handle(tb, func(e *contract.Envelope) {
		e.Kind, e.Flow = contract.KindFlowUpserted, &contract.FlowUpsert{ID: "flow-1", Name: "app", Template: tmpl.Content, TemplateID: tmpl.ID}
	})
	f.handle(tb, func(e *contract.Envelope) {
		e.Kind, e.Environment = contract.KindEnvironmentUpserted, &contract.EnvironmentUpsert{ID: "env-1", Name: "prod", Type: "K8S"}
	})
	for i := range artifacts {
		f.handle(tb, func(e *contract.Envelope) {
			e.Kind, e.Artifact = contract.KindArtifactReported, &contract.ArtifactReport{ID: fmt.Sprint("art-", i), FlowID: "flow-1",
				TrailName: "t1", Fingerprint: fp(i), Report: json.RawMessage(`{"filename": "x"}`)}
		})
	}
	return f
}

func fp(i int) string { return fmt.Sprintf("%064x", i+1) }

func (f *envFixture) handle(tb testing.TB, fill func(*contract.Envelope)) {
	tb.Helper()
	if err := f.ev.Handle(f.message(tb, fill)); err != nil {
		tb.Fatal(err)
	}
}

// latest is envID's latest snapshot, and its artifacts decoded.
func (f *envFixture) latest(tb testing.TB, envID string) (store.Snapshot, []SnapshotArtifact) {
	tb.Helper()
	s, err := f.st.LatestSnapshot(context.Background(), envID)
	if err != nil {
		tb.Fatal(err)
	}
	var arts []SnapshotArtifact
	if err := json.Unmarshal(s.Artifacts, &arts); err != nil {
		tb.Fatal(err)
	}
	return s, arts
}

// message is the fixture's next message, filled by fill.
func (f *envFixture) message(tb testing.TB, fill func(*contract.Envelope)) *message.Message {
	tb.Helper()
	f.seq++
	e := &contract.Envelope{ID: fmt.Sprint("m-", f.seq), OrgID: "org-1", Actor: contract.Actor{Name: "ci"}, At: float64(f.seq)}
	fill(e)
	b, err := contract.Marshal(e)
	if err != nil {
		tb.Fatal(err)
	}
	return message.NewMessage(e.ID, b)
}

// encoded answers a source of messages of fill's content, each with an ID of its own: fill's
// envelope is encoded once, and each message is a copy of it with the next ID written in. The
// evaluator receives messages as bytes, so a benchmark that sends them this way times applying
// them, not building and encoding them (a millisecond of a 1,000-artifact snapshot).
func (f *envFixture) encoded(tb testing.TB, fill func(*contract.Envelope)) func() *message.Message {
	tb.Helper()
	const idLen = 20
	blank := fmt.Sprintf("e-%0*d", idLen-2, 0)
	e := &contract.Envelope{ID: blank, OrgID: "org-1", Actor: contract.Actor{Name: "ci"}, At: 1}
	fill(e)
	b, err := contract.Marshal(e)
	if err != nil {
		tb.Fatal(err)
	}
	at := bytes.Index(b, []byte(`"`+blank+`"`)) + 1
	if at == 0 {
		tb.Fatal("the envelope's ID is not in its encoding")
	}
	return func() *message.Message {
		f.seq++
		id := fmt.Sprintf("e-%0*d", idLen-2, f.seq)
		payload := slices.Clone(b)
		copy(payload[at:], id)
		return message.NewMessage(id, payload)
	}
}

// report applies a snapshot of n artifacts, the first shifted by shift (so consecutive calls
// with different shifts change the running set).
func (f *envFixture) report(tb testing.TB, n, shift int) {
	insts := make([]contract.RunningInstance, n)
	for i := range n {
		insts[i] = contract.RunningInstance{Name: fmt.Sprint("app-", i), Fingerprint: fp((i + shift) % max(n, 1)), CreationTimestamp: 1}
	}
	f.handle(tb, runningIn(insts...))
}

// TestSnapshotRoundTripsDoNotGrow: applying a 1,000-artifact snapshot costs no more
// store round trips than a 10-artifact one, on PostgreSQL, where a statement is a round trip
// (SQLite's store cuts rows into parts of the sizes it keeps prepared instead).
func TestSnapshotRoundTripsDoNotGrow(t *testing.T) {
	trips := func(n int) int64 {
		st, _, _ := openPostgres(t)
		f := newEnvFixtureOn(t, st, n)
		f.report(t, n, 0)
		before := f.st.Statements()
		f.report(t, n, 1) // every artifact changes fingerprint: n exits, n starts
		return f.st.Statements() - before
	}
	// A small snapshot may take a few more: its rows go in parts of the sizes whose statements
	// stay prepared (sqlstore's preparedChunks), a large one's in one statement a table.
	small, large := trips(10), trips(1000)
	if large > small {
		t.Fatalf("a 10-artifact snapshot took %d round trips, a 1,000-artifact one %d", small, large)
	}
	t.Logf("round trips per snapshot: %d", large)
}

// TestRepeatedSnapshotCreatesNothing: the same report twice makes one snapshot, and the repeat
// is recognised by its digest without reading the last snapshot back, in fewer round trips
// than a change.
func TestRepeatedSnapshotCreatesNothing(t *testing.T) {
	f := newEnvFixture(t, 3)
	f.report(t, 3, 0)
	before := f.st.Statements()
	f.report(t, 3, 0)
	repeat := f.st.Statements() - before
	ts, err := f.st.SnapshotTimestamps(context.Background(), "env-1")
	if err != nil || len(ts) != 1 {
		t.Fatalf("snapshots %v %v, want 1", ts, err)
	}
	before = f.st.Statements()
	f.report(t, 3, 1)
	change := f.st.Statements() - before
	if repeat >= change/2 {
		t.Fatalf("a repeated report took %d round trips, a change %d: the repeat is not short-cut", repeat, change)
	}
	t.Logf("round trips: repeat %d, change %d", repeat, change)
}

// BenchmarkApplySnapshot1000Repeat applies a 1,000-artifact report that repeats the last one.
func BenchmarkApplySnapshot1000Repeat(b *testing.B) {
	benchSnapshots(b, func(int) int { return -1 })
}

// BenchmarkApplySnapshot1000 applies 1,000-artifact snapshots where every artifact changed.
func BenchmarkApplySnapshot1000(b *testing.B) {
	benchSnapshots(b, func(i int) int { return i % 2 })
}

// BenchmarkApplySnapshot1000OneChanged applies 1,000-artifact snapshots where one artifact changed.
func BenchmarkApplySnapshot1000OneChanged(b *testing.B) {
	f := newEnvFixture(b, 1001)
	f.report(b, 1000, 0)
	var builds [2]func() *message.Message // artifact 0 of the new build, then of the old one
	for k := range builds {
		insts := make([]contract.RunningInstance, 1000)
		for j := range 1000 {
			insts[j] = contract.RunningInstance{Name: fmt.Sprint("app-", j), Fingerprint: fp(j), CreationTimestamp: 1}
		}
		insts[0].Fingerprint = fp(1000 * (1 - k))
		builds[k] = f.encoded(b, runningIn(insts...))
	}
	before := f.st.Statements()
	b.ResetTimer()
	reportCPU(b)
	for i := range b.N {
		if err := f.ev.Handle(builds[i%2]()); err != nil { // alternate one artifact between two builds
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(f.st.Statements()-before)/float64(b.N), "statements/op") // on SQLite, not round trips
}

func benchSnapshots(b *testing.B, shift func(int) int) {
	f := newEnvFixture(b, 1000)
	f.report(b, 1000, 0)
	reports := map[int]func() *message.Message{} // by the shift of the running set
	for i := range 2 {
		k := 1 + shift(i)
		insts := make([]contract.RunningInstance, 1000)
		for j := range insts {
			insts[j] = contract.RunningInstance{Name: fmt.Sprint("app-", j), Fingerprint: fp((j + k) % 1000), CreationTimestamp: 1}
		}
		reports[k] = f.encoded(b, runningIn(insts...))
	}
	before := f.st.Statements()
	b.ResetTimer()
	reportCPU(b)
	for i := range b.N {
		if err := f.ev.Handle(reports[1+shift(i)]()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(f.st.Statements()-before)/float64(b.N), "statements/op") // on SQLite, not round trips
}

// TestEnvironmentEventEncoding: the documents of environment events and of the trail events of
// artifacts that started or stopped are those the maps they were built as encoded to, byte for
// byte: with and without provenance, compliance and repositories, and text that JSON escapes.
func TestEnvironmentEventEncoding(t *testing.T) {
	yes, no := true, false
	env := &store.Environment{ID: "env-1", Name: `prod "eu" <1>`}
	evs := []snapshot.Event{
		{Type: "started", Name: "api", Fingerprint: fp(0), Was: 0, Now: 2},
		{Type: "exited", Name: "web\u2028", Fingerprint: fp(1), Was: 1, Now: 0},
		{Type: "changed", Name: "db", Fingerprint: fp(2), Was: 1, Now: 3},
		{Type: "started", Name: "orphan", Fingerprint: fp(3), Now: 1},
	}
	prov := map[string][]Provenance{
		fp(0): {{FlowName: "api-ci", TrailName: "t<1>", ArtifactID: "a-1", RepoName: "acme/api", TrailID: "tr-1"},
			{FlowName: "api-cd", TrailName: "t2", ArtifactID: "a-2", RepoName: "acme/api", TrailID: "tr-2"}},
		fp(1): {{FlowName: "web", TrailName: "w", ArtifactID: "a-3", TrailID: "tr-3"}},
		fp(2): {{FlowName: "db", TrailName: "d", ArtifactID: "a-4", RepoName: "acme/db", TrailID: "tr-4"}},
	}
	arts := []SnapshotArtifact{{Name: "api", Fingerprint: fp(0), Compliant: &yes}, {Name: "db", Fingerprint: fp(2), Compliant: &no}}
	for _, snapshotCompliant := range []*bool{nil, &yes, &no} {
		events, trailEvents, err := environmentEvents(env, 7, 1764100000.5, evs, prov, arts, snapshotCompliant)
		if err != nil {
			t.Fatal(err)
		}
		compliance := map[string]*bool{}
		for _, a := range arts {
			compliance[a.Fingerprint] = a.compliance()
		}
		k := 0
		for i, ev := range evs {
			var flows []map[string]any
			for _, x := range prov[ev.Fingerprint] {
				flows = append(flows, map[string]any{"flow_name": x.FlowName, "trail_name": x.TrailName, "deployments": nil})
			}
			if flows == nil {
				flows = []map[string]any{}
			}
			pipeline := ""
			if p := prov[ev.Fingerprint]; len(p) > 0 {
				pipeline = p[0].FlowName
			}
			want, _ := json.Marshal(map[string]any{"pipeline": pipeline, "deployments": []int{}, "flows": flows,
				"artifact_compliance": compliance[ev.Fingerprint], "snapshot_compliance": snapshotCompliant, "was": ev.Was, "now": ev.Now})
			if string(events[i].Doc) != string(want) {
				t.Errorf("event %d: %s\nwant     %s", i, events[i].Doc, want)
			}
			typ := map[string]string{"started": "artifact_started_running", "exited": "artifact_stopped_running"}[ev.Type]
			if typ == "" {
				continue
			}
			for _, x := range prov[ev.Fingerprint] {
				want, _ := json.Marshal(map[string]any{"type": typ, "timestamp": 1764100000.5, "environment_name": env.Name,
					"snapshot_index": 7, "fingerprint": ev.Fingerprint, "artifact_name": ev.Name, "artifact_id": x.ArtifactID})
				if string(trailEvents[k].Doc) != string(want) || trailEvents[k].TrailID != x.TrailID {
					t.Errorf("trail event %d: %s %s\nwant           %s %s", k, trailEvents[k].TrailID, trailEvents[k].Doc, x.TrailID, want)
				}
				k++
			}
		}
		if k != len(trailEvents) || k != 3 { // two trails of api started, one of web stopped
			t.Errorf("%d trail events, want %d and 3", len(trailEvents), k)
		}
	}
}
