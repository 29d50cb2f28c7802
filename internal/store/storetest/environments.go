package storetest

import (
	"bytes"
	"encoding/json"
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
	_, err = e.s.LatestSnapshotDigest(e.ctx, "env-a")
	wantErr(t, "LatestSnapshotDigest of none", err, store.ErrNotFound)

	yes := true
	s1 := store.Snapshot{EnvID: "env-a", Index: 1, Timestamp: t0 + 1, Type: "K8S", Artifacts: json.RawMessage(`[{"name":"web"}]`),
		Digest: []byte{1, 2, 3}}
	s2 := store.Snapshot{EnvID: "env-a", Index: 2, Timestamp: t0 + 2, Type: "K8S", Compliant: &yes, Artifacts: json.RawMessage(`[]`),
		Digest: []byte{4, 5, 6}}
	e.update(t, func(tx store.Tx) error { return tx.InsertSnapshot(e.ctx, s1) })
	if d, err := e.s.LatestSnapshotDigest(e.ctx, "env-a"); err != nil || !bytes.Equal(d, s1.Digest) {
		t.Errorf("LatestSnapshotDigest after 1 = %v, %v", d, err)
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
	if d, err := e.s.LatestSnapshotDigest(e.ctx, "env-a"); err != nil || !bytes.Equal(d, s2.Digest) {
		t.Errorf("LatestSnapshotDigest after 2 = %v, %v", d, err)
	}
	// A snapshot stored without a digest leaves none: the old one no longer describes the latest.
	e.update(t, func(tx store.Tx) error {
		return tx.InsertSnapshot(e.ctx, store.Snapshot{EnvID: "env-a", Index: 3, Timestamp: t0 + 3, Type: "K8S", Artifacts: json.RawMessage(`[]`)})
	})
	_, err = e.s.LatestSnapshotDigest(e.ctx, "env-a")
	wantErr(t, "LatestSnapshotDigest after a snapshot without one", err, store.ErrNotFound)
	if ts, err := e.s.SnapshotTimestamps(e.ctx, "env-a"); err != nil || len(ts) != 3 || ts[0] != t0+1 {
		t.Errorf("SnapshotTimestamps = %v, %v", ts, err)
	}
}
