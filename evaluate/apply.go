package evaluate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/google/uuid"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// ErrPermanent marks a message that can never be applied (it is set aside, not retried).
var ErrPermanent = errors.New("permanent")

func permanent(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrPermanent, fmt.Sprintf(format, args...))
}

// applier folds messages into the store.
type applier struct {
	policies *policyJudge
	// lockTrails has an attestation's apply lock its trail's row (store.Tx HoldTrails): on
	// PostgreSQL that is what orders two transactions adding to one trail (see
	// applyAttestations). SQLite's single writer orders them already. Neither store writes the
	// row in the apply: it used to set last_modified_at there, a new version of each trail's row
	// in every batch (on SQLite a fifth of the pages an apply wrote) that the save then wrote
	// again. The save raises last_modified_at instead (store.ComplianceSave.ModifiedAt), which
	// readers see at the same moment, since what they see of an attestation waits for that save.
	lockTrails bool
}

// apply folds one message into the store inside tx and returns the trail it touched ("" if
// none), which then needs evaluating. It is deterministic given the store state, so a
// redelivered message that slipped past the Applied check would still converge.
func (ap applier) apply(ctx context.Context, tx store.Tx, e *contract.Envelope) (trailID string, err error) {
	pj := ap.policies
	switch e.Kind {
	case contract.KindFlowUpserted:
		return "", applyFlow(ctx, tx, e)
	case contract.KindFlowRenamed:
		r := e.FlowRename
		if r == nil {
			return "", permanent("flow rename without body")
		}
		if err := tx.RenameFlow(ctx, e.OrgID, r.FlowID, r.NewName, e.At); err != nil {
			return "", classify(err)
		}
		return "", pj.afterFlowChange(ctx, tx, e.OrgID, r.FlowID, e.At)
	case contract.KindFlowArchived:
		if e.FlowArchive == nil {
			return "", permanent("flow archive without body")
		}
		err := tx.ArchiveFlow(ctx, e.OrgID, e.FlowArchive.FlowID, e.At)
		if errors.Is(err, store.ErrNotFound) {
			return "", nil // archived already: nothing left to do
		}
		if err != nil {
			return "", err
		}
		return "", pj.afterFlowChange(ctx, tx, e.OrgID, e.FlowArchive.FlowID, e.At)
	case contract.KindRepoTagged:
		rt := e.RepoTags
		if rt == nil {
			return "", permanent("repo tags without body")
		}
		r, err := tx.RepoByID(ctx, e.OrgID, rt.RepoID)
		if err != nil {
			return "", classify(err)
		}
		tags := maps.Clone(r.Tags)
		if tags == nil {
			tags = map[string]string{}
		}
		maps.Copy(tags, rt.SetTags)
		for _, k := range rt.RemoveTags {
			delete(tags, k)
		}
		return "", tx.SetRepoTags(ctx, e.OrgID, r.ID, tags)
	case contract.KindFlowTagged:
		ft := e.FlowTags
		if ft == nil {
			return "", permanent("flow tags without body")
		}
		f, err := tx.FlowByID(ctx, e.OrgID, ft.FlowID)
		if err != nil {
			return "", classify(err)
		}
		for k, v := range ft.SetTags {
			f.Tags[k] = v
		}
		for _, k := range ft.RemoveTags {
			delete(f.Tags, k)
		}
		if err := tx.SetFlowTags(ctx, e.OrgID, f.ID, f.Tags, e.At); err != nil {
			return "", classify(err)
		}
		return "", pj.afterFlowChange(ctx, tx, e.OrgID, f.ID, e.At)
	case contract.KindTrailBegun:
		return applyTrail(ctx, tx, e)
	case contract.KindArtifactReported:
		return applyArtifact(ctx, tx, e)
	case contract.KindAttestationReported:
		return ap.applyAttestation(ctx, tx, e)
	case contract.KindEnvironmentUpserted:
		return "", applyEnvironment(ctx, tx, e)
	case contract.KindEnvironmentChanged:
		return "", applyEnvironmentChange(ctx, tx, pj, e)
	case contract.KindSnapshotReported:
		return "", applySnapshot(ctx, tx, pj, e)
	case contract.KindAllowlisted:
		return "", applyAllowlist(ctx, tx, pj, e)
	case contract.KindPolicyVersion:
		return "", applyPolicyVersion(ctx, tx, pj, e)
	case contract.KindPolicyAttachment:
		return "", applyPolicyAttachment(ctx, tx, pj, e)
	case contract.KindApprovalReported:
		return "", applyApproval(ctx, tx, e)
	case contract.KindControlChanged:
		return "", applyControl(ctx, tx, e)
	case contract.KindNotificationCreated, contract.KindNotificationUpdated, contract.KindNotificationDeleted:
		return "", applyNotificationRule(ctx, tx, e)
	case contract.KindCustomTypeCreated:
		return "", applyCustomType(ctx, tx, e)
	case contract.KindCustomTypeArchived:
		if e.TypeArchive == nil {
			return "", permanent("custom type archive without body")
		}
		err := tx.ArchiveCustomType(ctx, e.OrgID, e.TypeArchive.Name)
		if errors.Is(err, store.ErrNotFound) {
			return "", nil
		}
		return "", err
	}
	return "", permanent("unknown message kind %q", e.Kind)
}

// classify turns store outcomes that retrying cannot change into permanent errors.
func classify(err error) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	return err
}

func applyFlow(ctx context.Context, tx store.Tx, e *contract.Envelope) error {
	f := e.Flow
	if f == nil {
		return permanent("flow upsert without body")
	}
	if err := tx.PutTemplate(ctx, f.TemplateID, f.Template); err != nil {
		return err
	}
	_, err := tx.UpsertFlow(ctx, store.Flow{
		ID: f.ID, OrgID: e.OrgID, Name: f.Name, Description: f.Description, Visibility: f.Visibility,
		TemplateID: f.TemplateID, CreatedAt: e.At, LastModifiedAt: e.At,
	})
	return err
}

func applyTrail(ctx context.Context, tx store.Tx, e *contract.Envelope) (string, error) {
	b := e.Trail
	if b == nil {
		return "", permanent("trail begin without body")
	}
	flow, err := tx.FlowByID(ctx, e.OrgID, b.FlowID)
	if err != nil {
		return "", classify(err)
	}
	if b.Template != "" {
		if err := tx.PutTemplate(ctx, b.TemplateID, b.Template); err != nil {
			return "", err
		}
	}
	if err := ensureRepo(ctx, tx, e.OrgID, b.RepoInfo, e.At); err != nil {
		return "", err
	}
	tr := store.Trail{
		ID: b.ID, OrgID: e.OrgID, FlowID: flow.ID, Name: b.Name, TemplateID: flow.TemplateID,
		Description: b.Description, GitCommitInfo: b.GitCommitInfo, RepoInfo: b.RepoInfo, OriginURL: b.OriginURL,
		ExternalURLs: b.ExternalURLs, UserData: b.UserData, CreatedBy: e.Actor.Name, CreatedAt: e.At, LastModifiedAt: e.At,
	}
	existing, err := tx.TrailByName(ctx, flow.ID, b.Name)
	switch {
	case err == nil:
		// An update keeps what the new request does not say.
		tr.ID, tr.TemplateID = existing.ID, existing.TemplateID
		if tr.Description == nil {
			tr.Description = existing.Description
		}
		tr.GitCommitInfo = orRaw(tr.GitCommitInfo, existing.GitCommitInfo)
		tr.RepoInfo = orRaw(tr.RepoInfo, existing.RepoInfo)
		tr.ExternalURLs = orRaw(tr.ExternalURLs, existing.ExternalURLs)
		tr.UserData = orRaw(tr.UserData, existing.UserData)
		if tr.OriginURL == nil {
			tr.OriginURL = existing.OriginURL
		}
	case !errors.Is(err, store.ErrNotFound):
		return "", err
	}
	if b.Template != "" {
		tr.TemplateID = b.TemplateID
	}
	created, err := tx.UpsertTrail(ctx, tr)
	if err != nil {
		return "", err
	}
	typ := "trail_updated"
	if created {
		typ = "trail_reported"
	}
	ev := map[string]any{"type": typ, "timestamp": e.At, "user": e.Actor.Name, "template_id": tr.TemplateID}
	if len(tr.GitCommitInfo) > 0 {
		ev["git_commit_info"] = tr.GitCommitInfo
	}
	if err := appendEvent(ctx, tx, tr.ID, e.At, ev); err != nil {
		return "", err
	}
	return tr.ID, nil
}

func orRaw(v, fallback json.RawMessage) json.RawMessage {
	if len(v) == 0 || string(v) == "null" {
		return fallback
	}
	return v
}

func appendEvent(ctx context.Context, tx store.Tx, trailID string, at float64, ev map[string]any) error {
	doc, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode trail event: %w", err)
	}
	return tx.AppendTrailEvent(ctx, store.TrailEvent{TrailID: trailID, Doc: doc}, at)
}

// trailFor finds the trail a report names, creating it from the flow's template when an
// artifact is reported to a trail that was never begun (the legacy report flow does that).
func trailFor(ctx context.Context, tx store.Tx, e *contract.Envelope, flowID, name string, create bool) (trailID string, err error) {
	id, err := tx.TrailID(ctx, flowID, name)
	if err == nil || !errors.Is(err, store.ErrNotFound) || !create {
		return id, classify(err)
	}
	flow, err := tx.FlowByID(ctx, e.OrgID, flowID)
	if err != nil {
		return "", classify(err)
	}
	tr := store.Trail{ID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(e.ID)).String(), OrgID: e.OrgID, FlowID: flowID, Name: name, TemplateID: flow.TemplateID,
		CreatedBy: e.Actor.Name, CreatedAt: e.At, LastModifiedAt: e.At}
	if _, err := tx.UpsertTrail(ctx, tr); err != nil {
		return "", err
	}
	return tr.ID, appendEvent(ctx, tx, tr.ID, e.At, map[string]any{"type": "trail_reported", "timestamp": e.At, "user": e.Actor.Name})
}

func applyArtifact(ctx context.Context, tx store.Tx, e *contract.Envelope) (string, error) {
	a := e.Artifact
	if a == nil {
		return "", permanent("artifact report without body")
	}
	trailID, err := trailFor(ctx, tx, e, a.FlowID, a.TrailName, true)
	if err != nil {
		return "", err
	}
	var rep struct {
		Filename  string `json:"filename"`
		GitCommit string `json:"git_commit"`
		RepoInfo  struct {
			Name string `json:"name"`
		} `json:"repo_info"`
	}
	if err := json.Unmarshal(a.Report, &rep); err != nil {
		return "", permanent("artifact report body: %v", err)
	}
	if err := ensureRepo(ctx, tx, e.OrgID, repoInfoOf(a.Report), e.At); err != nil {
		return "", err
	}
	err = tx.InsertArtifact(ctx, store.Artifact{
		ID: a.ID, OrgID: e.OrgID, FlowID: a.FlowID, TrailID: trailID, Fingerprint: a.Fingerprint, TemplateName: a.TemplateName,
		Filename: rep.Filename, GitCommit: rep.GitCommit, RepoName: rep.RepoInfo.Name, Report: a.Report,
		ReportedBy: e.Actor.Name, CreatedAt: e.At,
	})
	if err != nil {
		return "", err
	}
	if err := tx.TouchTrail(ctx, trailID, e.At); err != nil {
		return "", err
	}
	// Where the fingerprint runs, the next snapshot shows this report among its provenance.
	if err := tx.MarkRunningChanged(ctx, e.OrgID, "", []string{a.Fingerprint}); err != nil {
		return "", err
	}
	return trailID, appendEvent(ctx, tx, trailID, e.At, map[string]any{
		"type": "artifact_creation_reported", "timestamp": e.At, "user": e.Actor.Name, "artifact_id": a.ID,
		"fingerprint": a.Fingerprint, "filename": rep.Filename, "template_reference_name": a.TemplateName,
	})
}

func (ap applier) applyAttestation(ctx context.Context, tx store.Tx, e *contract.Envelope) (string, error) {
	trails, err := ap.applyAttestations(ctx, tx, []*contract.Envelope{e})
	if err != nil {
		return "", err
	}
	return trails[0], nil
}

// applyAttestations applies a run of attestation messages (a batch's consecutive ones) with a
// statement per kind of row instead of three per message: resolving the trails, touching them
// (PostgreSQL), inserting the attestations. It answers each message's trail.
// A message whose trail does not exist fails the run, as applyAttestation would fail it alone.
func (ap applier) applyAttestations(ctx context.Context, tx store.Tx, run []*contract.Envelope) ([]string, error) {
	keys := make([]store.TrailKey, 0, len(run))
	for _, e := range run {
		if e.Attestation == nil {
			return nil, permanent("attestation without body")
		}
		keys = append(keys, store.TrailKey{FlowID: e.Attestation.FlowID, Name: e.Attestation.TrailName})
	}
	ids, err := tx.TrailIDs(ctx, keys)
	if err != nil {
		return nil, err
	}
	trails := make([]string, len(run))
	recs := make([]store.Attestation, len(run))
	var held []string // the trails to lock first (lockTrails)
	// A pipeline's attestations name its repository each (the CLI sends repo_info whenever the
	// CI says which), so a run's hundreds name a few: each is ensured once, and a repo_info
	// seen before in the run is not decoded again.
	var repos map[string]bool // by organization and repo_info as sent
	for i, e := range run {
		id, ok := ids[keys[i]]
		if !ok {
			return nil, classify(fmt.Errorf("trail %s: %w", e.Attestation.TrailName, store.ErrNotFound))
		}
		recs[i] = attestationRecord(e, id)
		raw := e.Attestation.RepoInfo
		if len(raw) == 0 { // a message of an earlier build
			raw = repoInfoOf(e.Attestation.Data)
		}
		if key := e.OrgID + "\x00" + string(raw); len(raw) > 0 && !repos[key] {
			if repos == nil {
				repos = make(map[string]bool, 4)
			}
			repos[key] = true
			if err := ensureRepo(ctx, tx, e.OrgID, raw, e.At); err != nil {
				return nil, err
			}
		}
		trails[i] = id
		if ap.lockTrails {
			held = append(held, id)
		}
	}
	// The trails are held first: on PostgreSQL their rows stay locked until commit, so two
	// transactions adding to one trail (two evaluators during a partition handover) take turns, and
	// a trail's attestations are numbered in the order they commit, which the evaluator's fact
	// cache relies on (store.PolicyReader.TrailAttestationFactsAfter). They are not written: the
	// save that follows raises last_modified_at to the attestations' time.
	if len(held) > 0 {
		if err := tx.HoldTrails(ctx, held); err != nil {
			return nil, err
		}
	}
	if err := tx.InsertAttestations(ctx, recs); err != nil {
		return nil, err
	}
	return trails, nil
}

// attestationRecord is the attestation record an attestation message makes. Its trail event is
// not stored: the store builds it from this record when the trail's events are read.
func attestationRecord(e *contract.Envelope, trailID string) store.Attestation {
	a := e.Attestation
	rec := store.Attestation{
		ID: a.ID, OrgID: e.OrgID, FlowID: a.FlowID, TrailID: trailID, Name: a.Name, Type: a.Type, IsCompliant: a.IsCompliant,
		ArtifactFingerprint: a.ArtifactFingerprint, TargetArtifact: a.TargetArtifact, Data: a.Data,
		ReportedBy: e.Actor.Name, CreatedAt: e.At,
	}
	if a.Overrides != nil {
		rec.OverridesID, rec.OverrideReason = a.Overrides.AttestationID, a.Overrides.Reason
	}
	if a.Evidence != nil {
		rec.EvidenceSHA256, rec.EvidenceName = a.Evidence.SHA256, a.Evidence.Filename
	}
	return rec
}

func applyCustomType(ctx context.Context, tx store.Tx, e *contract.Envelope) error {
	c := e.CustomType
	if c == nil {
		return permanent("custom type without body")
	}
	version := 1
	existing, err := tx.CustomType(ctx, e.OrgID, c.Name)
	switch {
	case err == nil:
		version = len(existing.Versions) + 1
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	return tx.PutCustomTypeVersion(ctx, e.OrgID, c.Name, c.Description, store.CustomTypeVersion{
		Version: version, Schema: c.Schema, Rules: c.Rules, Summary: summaryExprs(c.Summary), CreatedBy: e.Actor.Name, CreatedAt: e.At,
	})
}

// summaryExprs is a message's summary as the store keeps it (nil for none).
func summaryExprs(in []contract.SummaryExpr) []store.SummaryExpr {
	if len(in) == 0 {
		return nil
	}
	out := make([]store.SummaryExpr, len(in))
	for i, s := range in {
		out[i] = store.SummaryExpr{Name: s.Name, Expression: s.Expression}
	}
	return out
}

func applyControl(ctx context.Context, tx store.Tx, e *contract.Envelope) error {
	c := e.Control
	if c == nil {
		return permanent("control change without body")
	}
	existing, err := tx.Control(ctx, e.OrgID, c.Identifier)
	if errors.Is(err, store.ErrNotFound) && c.Op == contract.ControlCreate {
		return tx.PutControlVersion(ctx, e.OrgID, c.Identifier, store.ControlVersion{Version: 1, Name: deref(c.Name),
			Description: deref(c.Description), CreatedBy: e.Actor.Name, CreatedAt: e.At})
	}
	if err != nil {
		return classify(err)
	}
	switch c.Op {
	case contract.ControlCreate: // two creates raced past ingest's check; the first one stands
		return permanent("control %s already exists", c.Identifier)
	case contract.ControlUpdate:
		cur := existing.Current()
		v := store.ControlVersion{Version: cur.Version + 1, Name: cur.Name, Description: cur.Description, Links: cur.Links,
			CreatedBy: e.Actor.Name, CreatedAt: e.At}
		if c.Links != nil {
			v.Links = nil
			if len(*c.Links) > 0 {
				v.Links = *c.Links
			}
		}
		if c.Name != nil {
			v.Name = *c.Name
		}
		if c.Description != nil {
			v.Description = *c.Description
		}
		return tx.PutControlVersion(ctx, e.OrgID, c.Identifier, v)
	case contract.ControlArchive, contract.ControlUnarchive:
		return tx.SetControlArchived(ctx, e.OrgID, c.Identifier, c.Op == contract.ControlArchive)
	case contract.ControlTag:
		tags := maps.Clone(existing.Tags)
		if tags == nil {
			tags = map[string]string{}
		}
		maps.Copy(tags, c.SetTags)
		for _, k := range c.RemoveTags {
			delete(tags, k)
		}
		return tx.SetControlTags(ctx, e.OrgID, c.Identifier, tags)
	}
	return permanent("unknown control operation %q", c.Op)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
