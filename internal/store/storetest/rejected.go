package storetest

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

func rejectedID(r store.RejectedMessage) string { return r.ID }

// testRejected: dead letters are written with the applied mark, once; listed newest first per
// organization or for all; their payload comes back byte for byte.
func testRejected(t *testing.T, e *env) {
	a, b := e.org(t, "org-a", "acme"), e.org(t, "org-b", "beta")
	// A payload need not be JSON nor even UTF-8: an undecodable message is kept as it came.
	raw := []byte("{\"name\":\"nul\\u0000\"}\x00\xff\xfe")
	dead := func(id, orgID string, at float64) store.RejectedMessage {
		return store.RejectedMessage{ID: id, OrgID: orgID, Kind: "attestation.reported", PartitionKey: orgID + "/flow/t1",
			Payload: raw, Reason: "invalid byte sequence for " + id, Class: store.ClassPermanent, RejectedAt: at}
	}
	for i, m := range []store.RejectedMessage{dead("m-1", a.ID, t0), dead("m-2", b.ID, t0+1), dead("m-3", a.ID, t0+2),
		dead("m-4", "", t0+3)} {
		e.update(t, func(tx store.Tx) error {
			if err := tx.InsertRejected(e.ctx, m); err != nil {
				return err
			}
			return tx.MarkApplied(e.ctx, m.ID, "", m.RejectedAt)
		})
		if i == 0 { // a redelivery that slipped past the applied mark records nothing new
			again := m
			again.Reason = "another reason"
			e.update(t, func(tx store.Tx) error { return tx.InsertRejected(e.ctx, again) })
		}
	}
	if ok, err := e.s.Visible(e.ctx, []string{"m-1", "m-2", "m-3", "m-4"}); err != nil || !ok {
		t.Errorf("Visible(rejected messages) = %v, %v; want true (waiters must not hang on them)", ok, err)
	}
	boom := errors.New("boom")
	err := e.s.Update(e.ctx, func(tx store.Tx) error {
		if err := tx.InsertRejected(e.ctx, dead("m-5", a.ID, t0+4)); err != nil {
			return err
		}
		return boom
	})
	wantErr(t, "Update returning an error", err, boom)

	got, total, err := e.s.ListRejected(e.ctx, store.RejectedFilter{OrgID: a.ID})
	must(t, "ListRejected", err)
	checkIDs(t, "ListRejected acme", got, rejectedID, "m-3", "m-1")
	if total != 2 {
		t.Errorf("ListRejected acme total = %d, want 2", total)
	}
	if len(got) == 2 {
		m := got[1]
		if want := dead("m-1", a.ID, t0); m.OrgID != want.OrgID || m.Kind != want.Kind || m.PartitionKey != want.PartitionKey ||
			m.Reason != want.Reason || m.Class != store.ClassPermanent || m.RejectedAt != t0 || m.State != store.StateRejected ||
			m.RequestedAt != 0 || m.ReplayedAt != 0 || m.Seq == 0 || m.Seq >= got[0].Seq {
			t.Errorf("rejected message = %+v, want %+v in state rejected, older than m-3", m, want)
		}
		if !bytes.Equal(m.Payload, raw) {
			t.Errorf("payload = %q, want %q byte for byte", m.Payload, raw)
		}
	}
	got, total, err = e.s.ListRejected(e.ctx, store.RejectedFilter{})
	must(t, "ListRejected all", err)
	checkIDs(t, "ListRejected of every organization", got, rejectedID, "m-4", "m-3", "m-2", "m-1")
	if total != 4 {
		t.Errorf("ListRejected all total = %d, want 4", total)
	}
	got, total, err = e.s.ListRejected(e.ctx, store.RejectedFilter{OldestFirst: true, Page: store.Page{Page: 2, PerPage: 3}})
	must(t, "ListRejected oldest first, page 2", err)
	checkIDs(t, "ListRejected oldest first, page 2", got, rejectedID, "m-4")
	if total != 4 {
		t.Errorf("ListRejected page 2 total = %d, want 4", total)
	}

	m, err := e.s.RejectedMessage(e.ctx, a.ID, "m-1")
	if err != nil || m.ID != "m-1" || m.Reason != "invalid byte sequence for m-1" {
		t.Errorf("RejectedMessage(acme, m-1) = %+v, %v", m, err)
	}
	_, err = e.s.RejectedMessage(e.ctx, b.ID, "m-1")
	wantErr(t, "RejectedMessage of another organization", err, store.ErrNotFound)
	if m, err := e.s.RejectedMessage(e.ctx, "", "m-2"); err != nil || m.OrgID != b.ID {
		t.Errorf("RejectedMessage(any organization, m-2) = %+v, %v", m, err)
	}
	_, err = e.s.RejectedMessage(e.ctx, "", "m-5")
	wantErr(t, "RejectedMessage rolled back", err, store.ErrNotFound)
}

// testReplayRequests: a replay is requested by an admin, claimed by exactly one evaluator
// transaction (which marks the audit record applied), or rejected again with a new reason.
func testReplayRequests(t *testing.T, e *env) {
	a, b := e.org(t, "org-a", "acme"), e.org(t, "org-b", "beta")
	dead := func(id, orgID string) store.RejectedMessage {
		return store.RejectedMessage{ID: id, OrgID: orgID, Kind: "trail.begun", Payload: []byte(`{}`), Reason: "flow not found",
			Class: store.ClassPermanent, RejectedAt: t0}
	}
	e.update(t, func(tx store.Tx) error {
		for _, m := range []store.RejectedMessage{dead("m-1", a.ID), dead("m-2", a.ID), dead("m-3", b.ID), dead("m-4", a.ID)} {
			if err := tx.InsertRejected(e.ctx, m); err != nil {
				return err
			}
		}
		return tx.InsertAudit(e.ctx, store.AuditRecord{ID: "m-1", OrgID: a.ID, KeyID: "k", Actor: "ci", Operation: "beginTrail",
			Target: "/trails/acme/app", Outcome: store.AuditRejected, At: t0})
	})
	request := func(orgID, id string, at float64) (store.RejectedMessage, error) {
		var m store.RejectedMessage
		err := e.s.UpdateIdentities(e.ctx, func(tx store.IdentityTx) error {
			var err error
			m, err = tx.RequestReplay(e.ctx, orgID, id, at)
			return err
		})
		return m, err
	}
	claim := func(id string, at float64) bool {
		var ok bool
		e.update(t, func(tx store.Tx) error {
			var err error
			ok, err = tx.ClaimReplay(e.ctx, id, at)
			return err
		})
		return ok
	}
	state := func(id string) store.RejectedMessage {
		m, err := e.s.RejectedMessage(e.ctx, "", id)
		must(t, "RejectedMessage "+id, err)
		return m
	}

	_, err := request(b.ID, "m-1", t0+1)
	wantErr(t, "RequestReplay of another organization's message", err, store.ErrNotFound)
	_, err = request(a.ID, "nope", t0+1)
	wantErr(t, "RequestReplay of no message", err, store.ErrNotFound)
	if claim("m-1", t0+1) {
		t.Error("ClaimReplay of a message nobody asked to replay = true")
	}
	m, err := request(a.ID, "m-1", t0+2)
	if err != nil || m.State != store.StateReplayRequested || m.RequestedAt != t0+2 {
		t.Fatalf("RequestReplay = %+v, %v; want replay_requested at %v", m, err, t0+2)
	}
	got, _, err := e.s.ListRejected(e.ctx, store.RejectedFilter{State: store.StateReplayRequested})
	must(t, "ListRejected requested", err)
	checkIDs(t, "ListRejected requested", got, rejectedID, "m-1")

	// A transaction that claims and then fails changes nothing.
	boom := errors.New("boom")
	err = e.s.Update(e.ctx, func(tx store.Tx) error {
		if ok, err := tx.ClaimReplay(e.ctx, "m-1", t0+3); err != nil || !ok {
			t.Errorf("ClaimReplay in a failing transaction = %v, %v", ok, err)
		}
		return boom
	})
	wantErr(t, "Update returning an error", err, boom)
	if s := state("m-1").State; s != store.StateReplayRequested {
		t.Errorf("state after a rolled back claim = %s, want replay_requested", s)
	}

	// Of several transactions claiming at once, one does.
	var wg sync.WaitGroup
	var claimed atomic.Int32
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if claim("m-1", t0+4) {
				claimed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := claimed.Load(); n != 1 {
		t.Errorf("%d of 4 concurrent claims succeeded, want 1", n)
	}
	if m := state("m-1"); m.State != store.StateReplayed || m.ReplayedAt != t0+4 {
		t.Errorf("after the claim: %+v, want replayed at %v", m, t0+4)
	}
	recs, _, err := e.s.ListAudit(e.ctx, a.ID, store.AuditFilter{})
	must(t, "ListAudit", err)
	if len(recs) != 1 || recs[0].Outcome != store.AuditApplied {
		t.Errorf("audit records after the replay = %+v, want m-1 applied", recs)
	}
	// Asking again for a replayed message changes nothing.
	if m, err := request(a.ID, "m-1", t0+5); err != nil || m.State != store.StateReplayed || m.RequestedAt != t0+2 {
		t.Errorf("RequestReplay of a replayed message = %+v, %v; want it left replayed", m, err)
	}
	if claim("m-1", t0+5) {
		t.Error("ClaimReplay of a replayed message = true")
	}

	// A replay that fails for good is rejected again with its new reason; a message nobody asked
	// to replay is left alone.
	if _, err := request(a.ID, "m-2", t0+6); err != nil {
		t.Fatal(err)
	}
	e.update(t, func(tx store.Tx) error {
		if err := tx.RejectAgain(e.ctx, "m-2", "still no flow", store.ClassUnknown, t0+7); err != nil {
			return err
		}
		return tx.RejectAgain(e.ctx, "m-4", "never asked", store.ClassUnknown, t0+7)
	})
	if m := state("m-2"); m.State != store.StateRejected || m.Reason != "still no flow" || m.Class != store.ClassUnknown ||
		m.RejectedAt != t0+7 {
		t.Errorf("rejected again: %+v", m)
	}
	if m := state("m-4"); m.Reason != "flow not found" || m.RejectedAt != t0 {
		t.Errorf("RejectAgain changed a message nobody asked to replay: %+v", m)
	}

	// Replaying all of an organization asks for those not replayed yet.
	var n int
	err = e.s.UpdateIdentities(e.ctx, func(tx store.IdentityTx) error {
		var err error
		n, err = tx.RequestReplays(e.ctx, a.ID, t0+8)
		return err
	})
	if err != nil || n != 2 {
		t.Errorf("RequestReplays(acme) = %d, %v; want 2 (m-2 and m-4; m-1 is replayed)", n, err)
	}
	if s := state("m-3").State; s != store.StateRejected {
		t.Errorf("another organization's message is %s after RequestReplays(acme)", s)
	}
	err = e.s.UpdateIdentities(e.ctx, func(tx store.IdentityTx) error {
		var err error
		n, err = tx.RequestReplays(e.ctx, "", t0+9)
		return err
	})
	if err != nil || n != 1 {
		t.Errorf("RequestReplays(every organization) = %d, %v; want 1 (m-3)", n, err)
	}
}
