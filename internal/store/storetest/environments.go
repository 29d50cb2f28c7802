package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

func testSnapshots(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	envA := store.Environment{ID: "env-a", OrgID: "org-a", Name: "prod", Type: "K8S", Tags: map[string]string{}, CreatedAt: t0}
	e.update(t, func(tx store.Tx) error {
		_, err := tx.UpsertEnvironment(e.ctx, envA)
		return err
	})
	_, err := e.s.LatestSnapshot(e.ctx, "env-a")
	wantErr(t, "LatestSnapshot of none", err, store.ErrNotFound)
	_, _, err = e.s.LatestSnapshotDigest(e.ctx, "env-a")
	wantErr(t, "LatestSnapshotDigest of none", err, store.ErrNotFound)

	yes := true
	s1 := store.Snapshot{EnvID: "env-a", Index: 1, Timestamp: t0 + 1, Type: "K8S", Artifacts: json.RawMessage(`[{"name":"web"}]`),
		Digest: []byte{1, 2, 3}}
	s2 := store.Snapshot{EnvID: "env-a", Index: 2, Timestamp: t0 + 2, Type: "K8S", Compliant: &yes, Artifacts: json.RawMessage(`[]`),
		Digest: []byte{4, 5, 6}}
	e.update(t, func(tx store.Tx) error { return tx.InsertSnapshot(e.ctx, s1) })
	if i, d, err := e.s.LatestSnapshotDigest(e.ctx, "env-a"); err != nil || i != 1 || !bytes.Equal(d, s1.Digest) {
		t.Errorf("LatestSnapshotDigest after 1 = %d, %v, %v", i, d, err)
	}
	e.update(t, func(tx store.Tx) error { return tx.InsertSnapshot(e.ctx, s2) })
	got, err := e.s.LatestSnapshot(e.ctx, "env-a")
	must(t, "LatestSnapshot", err)
	if got.Index != 2 || got.Timestamp != t0+2 || got.Compliant == nil || !*got.Compliant || string(got.Artifacts) != "[]" {
		t.Errorf("LatestSnapshot = %+v", got)
	}
	if first, err := e.s.SnapshotByIndex(e.ctx, "env-a", 1); err != nil || first.Compliant != nil || string(first.Artifacts) != `[{"name":"web"}]` {
		t.Errorf("SnapshotByIndex(1) = %+v, %v", first, err)
	}
	if i, d, err := e.s.LatestSnapshotDigest(e.ctx, "env-a"); err != nil || i != 2 || !bytes.Equal(d, s2.Digest) {
		t.Errorf("LatestSnapshotDigest after 2 = %d, %v, %v", i, d, err)
	}
	// A snapshot stored without a digest leaves none: the old one no longer describes the latest.
	e.update(t, func(tx store.Tx) error {
		return tx.InsertSnapshot(e.ctx, store.Snapshot{EnvID: "env-a", Index: 3, Timestamp: t0 + 3, Type: "K8S", Artifacts: json.RawMessage(`[]`)})
	})
	_, _, err = e.s.LatestSnapshotDigest(e.ctx, "env-a")
	wantErr(t, "LatestSnapshotDigest after a snapshot without one", err, store.ErrNotFound)
	if ts, err := e.s.SnapshotTimestamps(e.ctx, "env-a"); err != nil || len(ts) != 3 || ts[0] != t0+1 {
		t.Errorf("SnapshotTimestamps = %v, %v", ts, err)
	}
	if list, err := e.s.ListSnapshots(e.ctx, "env-a", 1, 3); err != nil || len(list) != 3 || list[0].Index+list[2].Index != 4 {
		t.Errorf("ListSnapshots(1, 3) = %+v, %v", list, err)
	}
	// A large document (kept compressed) reads back as written.
	var large bytes.Buffer
	large.WriteString("[")
	for i := range 500 {
		if i > 0 {
			large.WriteString(",")
		}
		fmt.Fprintf(&large, `{"name":"app-%d","fingerprint":%q,"flows":[{"flow_name":"web","state":"COMPLIANT"}]}`, i, fp(fmt.Sprint(i)))
	}
	large.WriteString("]")
	e.update(t, func(tx store.Tx) error {
		return tx.InsertSnapshot(e.ctx, store.Snapshot{EnvID: "env-a", Index: 4, Timestamp: t0 + 4, Type: "K8S", Artifacts: large.Bytes(), Digest: []byte{7}})
	})
	for _, read := range []func() (store.Snapshot, error){
		func() (store.Snapshot, error) { return e.s.LatestSnapshot(e.ctx, "env-a") },
		func() (store.Snapshot, error) { return e.s.SnapshotByIndex(e.ctx, "env-a", 4) },
	} {
		if got, err := read(); err != nil || got.Index != 4 || !bytes.Equal(got.Artifacts, large.Bytes()) {
			t.Errorf("a %d-byte snapshot read back as %d bytes, %v", large.Len(), len(got.Artifacts), err)
		}
	}
}

// testRunningChanges: marks of running artifacts whose evidence changed, by fingerprint, by
// environment and by flow; cleared by ID, so a mark made after a list was read stays.
func testRunningChanges(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.org(t, "org-b", "other")
	f := e.flow(t, "org-a", "f-1", "web")
	tr := e.trail(t, f, "tr-1", "one", t0)
	e.update(t, func(tx store.Tx) error {
		for _, en := range []store.Environment{
			{ID: "env-a", OrgID: "org-a", Name: "prod", Type: "K8S", Tags: map[string]string{}, CreatedAt: t0},
			{ID: "env-b", OrgID: "org-a", Name: "stage", Type: "K8S", Tags: map[string]string{}, CreatedAt: t0},
			{ID: "env-c", OrgID: "org-b", Name: "prod", Type: "K8S", Tags: map[string]string{}, CreatedAt: t0},
		} {
			if _, err := tx.UpsertEnvironment(e.ctx, en); err != nil {
				return err
			}
		}
		run := func(env, org string, fps ...string) error {
			rs := make([]store.Running, len(fps))
			for i, x := range fps {
				rs[i] = store.Running{EnvID: env, Fingerprint: x, Name: "app-" + x[:2], Since: t0}
			}
			return tx.SetRunning(e.ctx, org, env, nil, rs)
		}
		if err := run("env-a", "org-a", fp("a1"), fp("a2"), fp("a3")); err != nil {
			return err
		}
		if err := run("env-b", "org-a", fp("a1")); err != nil {
			return err
		}
		if err := run("env-c", "org-b", fp("a1")); err != nil {
			return err
		}
		return tx.InsertArtifact(e.ctx, store.Artifact{ID: "art-1", OrgID: "org-a", FlowID: f.ID, TrailID: tr.ID,
			Fingerprint: fp("a3"), Report: json.RawMessage(`{}`), CreatedAt: t0})
	})
	marks := func(env string) (fps []string, ids []int64) {
		t.Helper()
		e.update(t, func(tx store.Tx) error {
			got, err := tx.RunningChanges(e.ctx, env)
			for _, c := range got {
				fps, ids = append(fps, c.Fingerprint), append(ids, c.ID)
			}
			return err
		})
		slices.Sort(fps)
		return fps, ids
	}
	want := func(env string, fps ...string) []int64 {
		t.Helper()
		got, ids := marks(env)
		if !slices.Equal(got, fps) {
			t.Errorf("RunningChanges(%s) = %v, want %v", env, got, fps)
		}
		return ids
	}
	// By fingerprint, in every environment of the organization where it runs; not running: no mark.
	e.update(t, func(tx store.Tx) error {
		return tx.MarkRunningChanged(e.ctx, "org-a", "", []string{fp("a1"), fp("zz")})
	})
	want("env-a", fp("a1"))
	want("env-b", fp("a1"))
	want("env-c")
	// In one environment; nil marks all of its artifacts.
	e.update(t, func(tx store.Tx) error { return tx.MarkRunningChanged(e.ctx, "org-a", "env-b", []string{fp("a1")}) })
	want("env-b", fp("a1"), fp("a1"))
	e.update(t, func(tx store.Tx) error { return tx.MarkRunningChanged(e.ctx, "org-a", "env-a", nil) })
	want("env-a", fp("a1"), fp("a1"), fp("a2"), fp("a3"))
	// Compacting keeps one mark per fingerprint.
	e.update(t, func(tx store.Tx) error { return tx.CompactRunningChanges(e.ctx, "env-a") })
	ids := want("env-a", fp("a1"), fp("a2"), fp("a3"))
	// By flow: the artifacts it reported, where they run.
	e.update(t, func(tx store.Tx) error { return tx.MarkFlowRunningChanged(e.ctx, "org-a", f.ID) })
	want("env-a", fp("a1"), fp("a2"), fp("a3"), fp("a3"))
	// Clearing by ID leaves the mark made after the list was read.
	e.update(t, func(tx store.Tx) error { return tx.ClearRunningChanges(e.ctx, ids) })
	want("env-a", fp("a3"))
	want("env-c")
}

// testOnCommit: functions registered in a transaction run after it commits (OnCommit) or after
// it ended without committing (OnRollback), never both, and never before it ends.
func testOnCommit(t *testing.T, e *env) {
	var commits, rollbacks int
	hooks := func(tx store.Tx) {
		tx.OnCommit(func() { commits++ })
		tx.OnRollback(func() { rollbacks++ })
	}
	e.update(t, func(tx store.Tx) error {
		hooks(tx)
		if commits+rollbacks != 0 {
			t.Error("a hook ran before the transaction ended")
		}
		return nil
	})
	if commits != 1 || rollbacks != 0 {
		t.Errorf("after a commit: %d commit and %d rollback hooks ran, want 1 and 0", commits, rollbacks)
	}
	err := e.s.Update(e.ctx, func(tx store.Tx) error {
		hooks(tx)
		return errBoom
	})
	if !errors.Is(err, errBoom) || commits != 1 || rollbacks != 1 {
		t.Errorf("after a rollback (%v): %d commit and %d rollback hooks ran in all, want 1 and 1", err, commits, rollbacks)
	}
	func() {
		defer func() { _ = recover() }()
		_ = e.s.Update(e.ctx, func(tx store.Tx) error {
			hooks(tx)
			panic("boom")
		})
	}()
	if commits != 1 || rollbacks != 2 {
		t.Errorf("after a panic: %d commit and %d rollback hooks ran in all, want 1 and 2", commits, rollbacks)
	}
}
