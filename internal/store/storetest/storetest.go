// Package storetest is the conformance suite every store.Store adapter passes. An adapter's
// own test calls Run with a function that opens a fresh, empty store.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

// Run runs the suite. open must return a fresh, empty store each time it is called and arrange
// (with t.Cleanup) for it to be closed and its data removed. Subtests run in parallel, so open
// must be safe to call concurrently.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"Orgs", testOrgs},
		{"UsersAndMemberships", testUsersAndMemberships},
		{"Keys", testKeys},
		{"ServiceAccounts", testServiceAccounts},
		{"ServiceAccountKeys", testServiceAccountKeys},
		{"Audit", testAudit},
		{"IdentityAdmin", testIdentityAdmin},
		{"Wipe", testWipe},
		{"WebSessions", testWebSessions},
		{"UpsertFlow", testUpsertFlow},
		{"ListFlows", testListFlows},
		{"RenameFlow", testRenameFlow},
		{"ArchiveFlow", testArchiveFlow},
		{"Templates", testTemplates},
		{"UpsertTrail", testUpsertTrail},
		{"TrailNullableFields", testTrailNullableFields},
		{"ListTrails", testListTrails},
		{"TrailEvents", testTrailEvents},
		{"SaveCompliance", testSaveCompliance},
		{"BulkEvaluation", testBulkEvaluation},
		{"Artifacts", testArtifacts},
		{"ArtifactsByPrefix", testArtifactsByPrefix},
		{"ArtifactsByCommit", testArtifactsByCommit},
		{"ListArtifacts", testListArtifacts},
		{"Attestations", testAttestations},
		{"BulkEvidence", testBulkEvidence},
		{"CustomTypes", testCustomTypes},
		{"Controls", testControls},
		{"Repos", testRepos},
		{"Policies", testPolicies},
		{"PolicyAttachments", testPolicyAttachments},
		{"Verdicts", testVerdicts},
		{"PolicyEvaluations", testPolicyEvaluations},
		{"EnvironmentState", testEnvironmentState},
		{"AttestationFactsByTrails", testAttestationFactsByTrails},
		{"TouchOrdersTrailAttestations", testTouchOrdersTrailAttestations},
		{"Snapshots", testSnapshots},
		{"RunningChanges", testRunningChanges},
		{"OnCommit", testOnCommit},
		{"Applied", testApplied},
		{"Dirty", testDirty},
		{"LockTrails", testLockTrails},
		{"Visible", testVisible},
		{"VisibleNotStarved", testVisibleNotStarved},
		{"PendingEvaluations", testPendingEvaluations},
		{"Positions", testPositions},
		{"InFlight", testInFlight},
		{"InFlightScopes", testInFlightScopes},
		{"TrailPages", testTrailPages},
		{"Rollback", testRollback},
		{"RollbackOnPanic", testRollbackOnPanic},
		{"Tenancy", testTenancy},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"NotificationRules", testNotificationRules},
		{"TriggerOutbox", testTriggerOutbox},
		{"ComplianceTriggers", testComplianceTriggers},
		{"Rejected", testRejected},
		{"ReplayRequests", testReplayRequests},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			tc.fn(t, &env{ctx: t.Context(), s: s})
		})
	}
}

// t0 is the base timestamp of the suite's records.
const t0 = 1_700_000_000.25

// env is one subtest's store. Helpers take the *testing.T of the (sub)test calling them.
type env struct {
	ctx context.Context
	s   store.Store
}

// update runs fn in a transaction that must commit.
func (e *env) update(t *testing.T, fn func(tx store.Tx) error) {
	t.Helper()
	if err := e.s.Update(e.ctx, fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func (e *env) org(t *testing.T, id, name string) store.Org {
	t.Helper()
	o := store.Org{ID: id, Name: name, CreatedAt: t0}
	if err := e.s.CreateOrg(e.ctx, o); err != nil {
		t.Fatalf("CreateOrg %s: %v", name, err)
	}
	return o
}

// flow creates a flow with its own template.
func (e *env) flow(t *testing.T, orgID, id, name string) store.Flow {
	t.Helper()
	f := store.Flow{ID: id, OrgID: orgID, Name: name, Description: "flow " + name, Visibility: "private",
		TemplateID: "tpl-" + id, Template: "version: 1\n", Tags: map[string]string{}, CreatedAt: t0, LastModifiedAt: t0}
	e.update(t, func(tx store.Tx) error {
		if err := tx.PutTemplate(e.ctx, f.TemplateID, f.Template); err != nil {
			return err
		}
		created, err := tx.UpsertFlow(e.ctx, f)
		if err == nil && !created {
			t.Errorf("UpsertFlow %s: created = false for a new flow", name)
		}
		return err
	})
	return f
}

func (e *env) trail(t *testing.T, f store.Flow, id, name string, at float64) store.Trail {
	t.Helper()
	tr := store.Trail{ID: id, OrgID: f.OrgID, FlowID: f.ID, Name: name, TemplateID: f.TemplateID,
		CreatedBy: "alice", CreatedAt: at, LastModifiedAt: at, State: "INCOMPLETE"}
	e.update(t, func(tx store.Tx) error {
		_, err := tx.UpsertTrail(e.ctx, tr)
		return err
	})
	return tr
}

func (e *env) artifact(t *testing.T, tr store.Trail, id, fingerprint, commit, repo string, at float64) store.Artifact {
	t.Helper()
	a := store.Artifact{ID: id, OrgID: tr.OrgID, FlowID: tr.FlowID, TrailID: tr.ID, Fingerprint: fingerprint,
		TemplateName: "app", Filename: id + ".tar", GitCommit: commit, RepoName: repo,
		Report: json.RawMessage(`{"filename":"` + id + `.tar"}`), ReportedBy: "ci", CreatedAt: at, State: "INCOMPLETE"}
	e.update(t, func(tx store.Tx) error { return tx.InsertArtifact(e.ctx, a) })
	return a
}

func (e *env) attestation(t *testing.T, tr store.Trail, id, name string, at float64) store.Attestation {
	t.Helper()
	a := newAttestation(tr, id, name, at)
	e.update(t, func(tx store.Tx) error { return tx.InsertAttestation(e.ctx, a) })
	return a
}

func newAttestation(tr store.Trail, id, name string, at float64) store.Attestation {
	return store.Attestation{ID: id, OrgID: tr.OrgID, FlowID: tr.FlowID, TrailID: tr.ID, Name: name, Type: "generic",
		IsCompliant: true, Data: json.RawMessage(`{"id":"` + id + `"}`), ReportedBy: "ci", CreatedAt: at}
}

// wantErr fails unless errors.Is(err, target).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want %v", what, err, target)
	}
}

// must fails the test on err.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// sameJSON reports whether a and b encode the same value; both empty counts as equal. Adapters
// may normalise JSON (whitespace, escaping), so raw documents are compared by meaning.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func checkJSON(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	if !sameJSON(got, want) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// checkIDs compares the IDs of got with want, in order.
func checkIDs[T any](t *testing.T, what string, got []T, id func(T) string, want ...string) {
	t.Helper()
	ids := make([]string, 0, len(got))
	for _, g := range got {
		ids = append(ids, id(g))
	}
	if !slices.Equal(ids, want) {
		t.Errorf("%s: ids = %q, want %q", what, ids, want)
	}
}

// checkIDSet compares the IDs of got with want, ignoring order.
func checkIDSet[T any](t *testing.T, what string, got []T, id func(T) string, want ...string) {
	t.Helper()
	ids := make([]string, 0, len(got))
	for _, g := range got {
		ids = append(ids, id(g))
	}
	slices.Sort(ids)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(ids, want) {
		t.Errorf("%s: ids = %q, want %q (any order)", what, ids, want)
	}
}

func flowID(f store.Flow) string               { return f.ID }
func flowName(f store.Flow) string             { return f.Name }
func trailID(tr store.Trail) string            { return tr.ID }
func artifactID(a store.Artifact) string       { return a.ID }
func attestationID(a store.Attestation) string { return a.ID }
func orgID(o store.Org) string                 { return o.ID }
func customTypeName(c store.CustomType) string { return c.Name }
