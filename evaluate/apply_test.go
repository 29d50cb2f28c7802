package evaluate

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore/sqlitetest"
)

// TestLastModifiedFollowsAttestations: a trail's last_modified_at is the time of its latest
// attestation once the attestations are evaluated, on both stores, whether they came one by one
// or in a batch, and a late message with an older time does not take it back. The applies leave
// it to the save (store.ComplianceSave.ModifiedAt), which this fails without.
func TestLastModifiedFollowsAttestations(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"sqlite", func(t *testing.T) store.Store { return sqlitetest.Open(t) }},
		{"postgres", func(t *testing.T) store.Store { st, _, _ := openPostgres(t); return st }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixtureOn(t, c.open(t), Config{}, nil)
			begun := f.trail().LastModifiedAt
			f.handle(f.attestation("tests", true))
			f.evaluateAll()
			if got, want := f.trail().LastModifiedAt, begun+1; got != want {
				t.Fatalf("last_modified_at %v after one attestation, want its time %v", got, want)
			}
			batch := []*message.Message{f.attestation("lint", true), f.attestation("sbom", true)}
			if done, err := f.ev.HandleBatch(context.Background(), batch); err != nil || done != len(batch) {
				t.Fatalf("HandleBatch = %d, %v", done, err)
			}
			f.evaluateAll()
			latest := begun + 3
			if got := f.trail().LastModifiedAt; got != latest {
				t.Fatalf("last_modified_at %v after a batch, want its last attestation's time %v", got, latest)
			}
			late := f.env(contract.KindAttestationReported, func(e *contract.Envelope) {
				e.At = begun - 100 // an ingest process whose clock is behind
				e.Attestation = &contract.AttestationInput{ID: "att-late", FlowID: "flow-1", TrailName: "t1", Name: "tests",
					Type: "generic", IsCompliant: true, Data: json.RawMessage(`{}`)}
			})
			f.handle(late)
			f.evaluateAll()
			if got := f.trail().LastModifiedAt; got != latest {
				t.Fatalf("last_modified_at %v after a late message, want %v kept", got, latest)
			}
		})
	}
}

// repoCountingStore counts the EnsureRepo calls of its transactions.
type repoCountingStore struct {
	store.Store
	ensured map[string]int // by repo name
}

type repoCountingTx struct {
	store.Tx
	s *repoCountingStore
}

func (s *repoCountingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(repoCountingTx{Tx: tx, s: s}) })
}

func (t repoCountingTx) EnsureRepo(ctx context.Context, r store.Repo) error {
	t.s.ensured[r.Name]++
	return t.Tx.EnsureRepo(ctx, r)
}

// TestBatchEnsuresEachRepoOnce: a batch of attestations naming a few repositories (a
// pipeline's attestations each name its own) records each repository, with the time of the
// first message naming it, in one statement per repository, not per attestation; whether the
// message carries its repo_info beside the data (ingest now) or only in it (earlier builds).
func TestBatchEnsuresEachRepoOnce(t *testing.T) {
	st := &repoCountingStore{Store: sqlitetest.Open(t), ensured: map[string]int{}}
	f := newFixtureOn(t, st, Config{}, nil)
	// inData: the repo_info only in the data, as messages of earlier builds carry it; otherwise
	// also in the envelope, as ingest sends it now.
	withRepo := func(name, repo string, inData bool) *message.Message {
		return f.env(contract.KindAttestationReported, func(e *contract.Envelope) {
			data, info := `{}`, ""
			if repo != "" {
				info = `{"id":"` + repo + `-id","name":"` + repo + `","url":"https://github.com/` + repo + `","provider":"github"}`
				data = `{"repo_info":` + info + `}`
			}
			e.Attestation = &contract.AttestationInput{ID: "att-" + e.ID, FlowID: "flow-1", TrailName: "t1", Name: name,
				Type: "generic", IsCompliant: true, Data: json.RawMessage(data)}
			if !inData && info != "" {
				e.Attestation.RepoInfo = json.RawMessage(info)
			}
		})
	}
	batch := []*message.Message{withRepo("a", "acme/app", false), withRepo("b", "acme/lib", true), withRepo("c", "acme/app", true),
		withRepo("d", "", false), withRepo("e", "acme/app", false), withRepo("f", "acme/svc", false)}
	firstAt := 1000.0 + float64(f.seq) - 5 // the first message's time (fixture.env numbers them)
	if done, err := f.ev.HandleBatch(context.Background(), batch); err != nil || done != len(batch) {
		t.Fatalf("HandleBatch = %d, %v", done, err)
	}
	if st.ensured["acme/app"] != 1 || st.ensured["acme/lib"] != 1 || st.ensured["acme/svc"] != 1 || len(st.ensured) != 3 {
		t.Errorf("EnsureRepo calls by repository: %v, want one each of acme/app, acme/lib and acme/svc", st.ensured)
	}
	repos, err := st.ListRepos(context.Background(), f.orgID)
	if err != nil {
		t.Fatal(err)
	}
	if len(repos) != 3 || repos[0].Name != "acme/app" || repos[1].Name != "acme/lib" || repos[2].Name != "acme/svc" {
		t.Fatalf("repos %+v, want acme/app, acme/lib and acme/svc", repos)
	}
	if repos[0].CreatedAt != firstAt || repos[1].CreatedAt != firstAt+1 {
		t.Errorf("repos created at %v and %v, want their first messages' times %v and %v", repos[0].CreatedAt, repos[1].CreatedAt, firstAt, firstAt+1)
	}
}
