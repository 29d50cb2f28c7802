package evaluate

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
	"github.com/veritrail/veritrail/internal/store/sqlstore/sqlitetest"
	"github.com/veritrail/veritrail/policies/template"
)

// BenchmarkEvaluatorThroughput is the evaluator's whole job per attestation, as `veritrail bench`
// loads it: batches spread over 1,000 trails, each batch applied (HandleBatch, audit records
// included) and its trails evaluated and saved (evaluateAll). ns/op is per message. On SQLite the
// batches hold 64 messages, as the embedded bus delivers them; on PostgreSQL 8, one per partition
// as Kafka does (skipped without a server). Message and attestation IDs are time-ordered UUIDs as
// ingest makes them (ids=v7), or random ones (ids=v4) to show what their order is worth; trail
// IDs are random, as trails begun over days are to the attestations of one moment; the data is
// about 1 KB, as the bench sends it. sqlite/ids=v7/in-apply evaluates in the batch's
// transaction (Config.EvaluateInApply), as the embedded mode does. Beside ns/op it reports the CPU (cpu-us/op), the statements
// sent (PostgreSQL) and, on Linux, the bytes and write calls (wbytes/op, wcalls/op) per message.
//
//	go test -run x -bench EvaluatorThroughput -benchtime 20000x -cpuprofile cpu.pprof ./evaluate
func BenchmarkEvaluatorThroughput(b *testing.B) {
	v7 := func() string { return uuid.Must(uuid.NewV7()).String() }
	sqlite := func(b *testing.B) store.Store { return sqlitetest.Open(b) }
	for _, c := range []struct {
		name    string
		open    func(*testing.B) store.Store
		ids     func() string
		batch   int
		inApply bool
	}{
		{"sqlite/ids=v7", sqlite, v7, 64, false},
		{"sqlite/ids=v4", sqlite, uuid.NewString, 64, false},
		// As the embedded mode runs it: each batch's trails evaluated in its transaction.
		{"sqlite/ids=v7/in-apply", sqlite, v7, 64, true},
		// The distributed evaluator's batches hold one message per partition: 8 here.
		{"postgres/ids=v7", openBenchPostgres, v7, 8, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchmarkEvaluatorThroughput(b, c.open(b), c.ids, c.batch, Config{EvaluateInApply: c.inApply})
		})
	}
}

// openBenchPostgres opens the store in a new schema of VERITRAIL_TEST_POSTGRES (or the local
// server the tests use), dropped afterwards; it skips when there is no server.
func openBenchPostgres(b *testing.B) store.Store {
	dsn := cmp.Or(os.Getenv("VERITRAIL_TEST_POSTGRES"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	admin, err := sql.Open("pgx", dsn)
	if err == nil {
		err = admin.Ping()
	}
	if err != nil {
		b.Skipf("PostgreSQL unreachable: %v", err)
	}
	schema := fmt.Sprintf("vt_bench_%d", time.Now().UnixNano())
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		b.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	st, err := sqlstore.OpenPostgres(context.Background(), u.String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		st.Close()
		_, _ = admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		admin.Close()
	})
	return st
}

func benchmarkEvaluatorThroughput(b *testing.B, st store.Store, newID func() string, batchSize int, cfg Config) {
	const trails = 1000
	ctx := context.Background()
	ev, err := New(cfg, Deps{Store: st, Engine: template.NewEngine(template.EngineOptions{})})
	if err != nil {
		b.Fatal(err)
	}
	tmpl, err := template.Parse([]byte("version: 1\ntrail:\n  attestations:\n  - name: smoke\n    type: generic\n"))
	if err != nil {
		b.Fatal(err)
	}
	msg := func(e *contract.Envelope) *message.Message {
		e.OrgID, e.Actor = "org-1", contract.Actor{KeyID: "k", Name: "ci"}
		p, err := contract.Marshal(e)
		if err != nil {
			b.Fatal(err)
		}
		return message.NewMessage(e.ID, p)
	}
	apply := func(msgs []*message.Message) {
		if n, err := ev.HandleBatch(ctx, msgs); err != nil || n != len(msgs) {
			b.Fatalf("HandleBatch = %d, %v", n, err)
		}
		ev.mu.Lock()
		ids := make([]string, 0, len(ev.dirty))
		for id := range ev.dirty {
			ids = append(ids, id)
		}
		clear(ev.dirty)
		ev.mu.Unlock()
		ev.evaluateAll(ctx, ids, nil)
	}
	setup := []*message.Message{msg(&contract.Envelope{ID: "flow", Kind: contract.KindFlowUpserted,
		Flow: &contract.FlowUpsert{ID: "flow-1", Name: "app", Visibility: "private", Template: tmpl.Content, TemplateID: tmpl.ID}})}
	for i := range trails {
		setup = append(setup, msg(&contract.Envelope{ID: newID(), Kind: contract.KindTrailBegun,
			Trail: &contract.TrailBegin{ID: uuid.NewString(), FlowID: "flow-1", Name: fmt.Sprint("trail-", i)}}))
	}
	for len(setup) > 0 {
		n := min(len(setup), batchSize)
		apply(setup[:n])
		setup = setup[n:]
	}
	type counter interface{ Statements() int64 }
	var sent0 int64
	if c, ok := st.(counter); ok {
		sent0 = c.Statements()
		b.Cleanup(func() { b.ReportMetric(float64(c.Statements()-sent0)/float64(b.N), "statements/op") })
	}
	data := json.RawMessage(`{"origin_url": "https://ci.example/run", "user_data": {"pad": "` + strings.Repeat("x", 900) + `"}}`)
	batch := make([]*message.Message, 0, batchSize)
	b.ResetTimer()
	reportCPU(b)
	reportWrites(b)
	for i := range b.N {
		batch = append(batch, msg(&contract.Envelope{ID: newID(), Kind: contract.KindAttestationReported, At: float64(i),
			Request: &contract.Request{Operation: "attest_generic", Target: "/attestations/acme/app/trail/t/generic"}, // audited, as ingest sends it
			Attestation: &contract.AttestationInput{ID: newID(), FlowID: "flow-1", TrailName: fmt.Sprint("trail-", i%trails),
				Name: "smoke", Type: "generic", IsCompliant: true, Data: data}}))
		if len(batch) == batchSize || i == b.N-1 {
			apply(batch)
			batch = batch[:0]
		}
	}
}
