package evaluate

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"go.opentelemetry.io/otel/trace"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/snapshot"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/tracing"
	"github.com/veritrail/veritrail/policies/policyeval"
)

// Notification triggers are written to the outbox in the transaction of the change they derive
// from (a snapshot, an allowlist entry; compliance changes are the store's, see
// store.EnvironmentWriter), and the relay publishes them. Only (environment, trigger) pairs that
// some rule of the organization watches are written: an organization without rules pays one
// read per changed snapshot and nothing else.

// watched is the set of (environment name, trigger) pairs the organization's rules fire on.
type watched map[[2]string]bool

func watchedBy(ctx context.Context, tx store.Tx, orgID string) (watched, error) {
	rules, err := tx.NotificationRules(ctx, orgID)
	if err != nil {
		return nil, err
	}
	w := watched{}
	for _, r := range rules {
		for _, env := range r.Environments {
			for _, t := range r.Triggers {
				w[[2]string{env, t}] = true
			}
		}
	}
	return w, nil
}

// triggerID derives a trigger's ID from what happened, so that applying the same change twice
// yields the same trigger (the outbox and the delivery log then keep it once).
func triggerID(parts ...string) string {
	var b []byte
	for _, p := range parts {
		b = fmt.Appendf(b, "%d:%s/", len(p), p) // length prefixes keep ("a/b", "c") and ("a", "b/c") apart
	}
	return uuid.NewSHA1(uuid.NameSpaceOID, b).String()
}

// enqueue marshals triggers into the outbox.
func enqueue(ctx context.Context, tx store.Tx, triggers []*contract.Trigger) error {
	if len(triggers) == 0 {
		return nil
	}
	var md map[string]string // the change's trace, which the notify tier's deliveries continue
	if trace.SpanContextFromContext(ctx).IsValid() {
		md = map[string]string{}
		tracing.Inject(ctx, md)
	}
	rows := make([]store.Trigger, len(triggers))
	for i, t := range triggers {
		payload, err := contract.MarshalTrigger(t)
		if err != nil {
			return err
		}
		rows[i] = store.Trigger{ID: t.ID, OrgID: t.OrgID, EnvID: t.EnvID, At: t.At, Payload: payload, Metadata: md}
	}
	return tx.EnqueueTriggers(ctx, rows)
}

// artifactTrigger names the trigger of a snapshot event: a start, an exit, or a change of the
// instance count. A change at an equal count (instances replaced, with include_scaling) scales
// nothing and fires nothing.
func artifactTrigger(ev snapshot.Event) string {
	switch {
	case ev.Type == snapshot.Started:
		return contract.TriggerStartedArtifact
	case ev.Type == snapshot.Exited:
		return contract.TriggerExitedArtifact
	case ev.Type == snapshot.Changed && ev.Was != ev.Now:
		return contract.TriggerScaledArtifact
	}
	return ""
}

func triggerEnvironment(env *store.Environment) contract.TriggerEnvironment {
	return contract.TriggerEnvironment{Name: env.Name, Type: env.Type, Compliant: env.State}
}

func triggerArtifact(name, fp string, was, now int, prov []Provenance, allowed bool) *contract.TriggerArtifact {
	a := &contract.TriggerArtifact{Name: name, Fingerprint: fp, Compliant: artifactCompliance(prov, allowed),
		InstancesBefore: was, InstancesNow: now}
	for _, p := range prov {
		ok := p.State == "COMPLIANT"
		a.Provenance = append(a.Provenance, contract.TriggerProvenance{Flow: p.FlowName, Trail: p.TrailName, ArtifactID: p.ArtifactID,
			GitCommit: deref(p.GitCommit), CommitURL: deref(p.CommitURL), Compliant: &ok})
	}
	return a
}

// enqueueSnapshotTriggers writes the triggers of a new snapshot's events.
func enqueueSnapshotTriggers(ctx context.Context, tx store.Tx, e *contract.Envelope, env *store.Environment, index int,
	evs []snapshot.Event, prov map[string][]Provenance, allowed map[string]bool) error {
	if len(evs) == 0 {
		return nil
	}
	w, err := watchedBy(ctx, tx, e.OrgID)
	if err != nil || len(w) == 0 {
		return err
	}
	var out []*contract.Trigger
	for _, ev := range evs {
		name := artifactTrigger(ev)
		if name == "" || !w[[2]string{env.Name, name}] {
			continue
		}
		out = append(out, &contract.Trigger{
			ID:    triggerID("snapshot", env.ID, fmt.Sprint(index), name, ev.Name, ev.Fingerprint),
			OrgID: e.OrgID, EnvID: env.ID, Trigger: name, At: e.At, Description: ev.Description,
			Environment: triggerEnvironment(env),
			Snapshot:    &contract.TriggerSnapshot{Index: index, At: e.At},
			Artifact:    triggerArtifact(ev.Name, ev.Fingerprint, ev.Was, ev.Now, prov[ev.Fingerprint], allowed[ev.Fingerprint]),
		})
	}
	return enqueue(ctx, tx, out)
}

// enqueueAllowedTrigger writes the ON_ALLOWED_ARTIFACT trigger of an allowlist entry.
func enqueueAllowedTrigger(ctx context.Context, tx store.Tx, e *contract.Envelope, a *contract.AllowlistEntry) error {
	env, err := tx.EnvironmentByID(ctx, e.OrgID, a.EnvID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // the entry applies to nothing a rule could name
	}
	if err != nil {
		return err
	}
	w, err := watchedBy(ctx, tx, e.OrgID)
	if err != nil || !w[[2]string{env.Name, contract.TriggerAllowedArtifact}] {
		return err
	}
	ev, err := policyeval.LoadReports(ctx, tx, e.OrgID, []string{a.Fingerprint})
	if err != nil {
		return err
	}
	prov := provenance(ev, []string{a.Fingerprint})
	name := a.ArtifactName
	if name == "" { // the CLI's artifact_name is optional: name it as it runs there, if it does
		running, err := tx.RunningIn(ctx, e.OrgID, a.Fingerprint)
		if err != nil {
			return err
		}
		for _, r := range running {
			if r.EnvID == env.ID {
				name = r.Name
			}
		}
	}
	t := &contract.Trigger{
		ID:    triggerID("allowlist", a.ID),
		OrgID: e.OrgID, EnvID: env.ID, Trigger: contract.TriggerAllowedArtifact, At: e.At, Description: a.Description,
		Environment: triggerEnvironment(&env),
		Artifact:    triggerArtifact(name, a.Fingerprint, 0, 0, prov[a.Fingerprint], true),
		Allowlisted: &contract.TriggerAllowlisted{By: e.Actor.Name, Description: a.Description},
	}
	return enqueue(ctx, tx, []*contract.Trigger{t})
}
