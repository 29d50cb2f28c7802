package tier

import (
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/notify"
	"github.com/veritrail/veritrail/plugins/sdk"
)

// Rule is a stored rule as the pipeline routes it. org is the organization's name: it keys the
// delivery log and is what receivers see.
func Rule(org string, r store.NotificationRule) notify.Rule {
	out := notify.Rule{Org: org, Number: r.Number, Name: r.Name, Environments: r.Environments}
	for _, t := range r.Triggers {
		out.Triggers = append(out.Triggers, sdk.Trigger(t))
	}
	for _, t := range r.Targets {
		out.Targets = append(out.Targets, sdk.Target{ID: t.ID, Type: sdk.TargetType(t.Type), URL: t.URL, Secret: t.Secret,
			Recipients: t.Emails, Plugin: t.Plugin, Params: t.Context})
	}
	return out
}

// Event is a trigger as notifiers see it, with links to the pages under base (none when base
// is empty).
func Event(t *contract.Trigger, org, base string) sdk.Event {
	link := func(parts ...string) string {
		if base == "" {
			return ""
		}
		u := base + "/" + url.PathEscape(org)
		for _, p := range parts {
			u += "/" + url.PathEscape(p)
		}
		return u
	}
	env := t.Environment.Name
	ev := sdk.Event{
		ID: t.ID, Trigger: sdk.Trigger(t.Trigger), OccurredAt: unixTime(t.At), Description: t.Description,
		Environment: sdk.Environment{Name: env, Type: t.Environment.Type, HTMLURL: link("environments", env),
			Compliant: t.Environment.Compliant},
	}
	if s := t.Snapshot; s != nil {
		ev.Snapshot = &sdk.Snapshot{Index: int64(s.Index), Compliant: s.Compliant, ReportedAt: unixTime(s.At),
			HTMLURL: link("environments", env, "snapshots", fmt.Sprint(s.Index))}
	}
	if a := t.Artifact; a != nil {
		art := &sdk.Artifact{Name: a.Name, Fingerprint: a.Fingerprint, Compliant: a.Compliant,
			InstancesBefore: int64(a.InstancesBefore), InstancesNow: int64(a.InstancesNow), Provenance: []sdk.Provenance{}}
		for i, p := range a.Provenance {
			art.Provenance = append(art.Provenance, sdk.Provenance{Flow: p.Flow, Trail: p.Trail, GitCommit: p.GitCommit,
				CommitURL: p.CommitURL, HTMLURL: link("flows", p.Flow, "trails", p.Trail), Compliant: p.Compliant})
			if i == 0 && base != "" { // the artifact's page, as its html_url is in the API
				art.HTMLURL = link("flows", p.Flow, "artifacts", a.Fingerprint) + "?artifact_id=" + url.QueryEscape(p.ArtifactID)
			}
		}
		ev.Artifact = art
	}
	return ev
}

// unixTime turns the contract's fractional Unix seconds into a time, to the microsecond.
func unixTime(s float64) time.Time {
	if s == 0 {
		return time.Time{}
	}
	sec, frac := math.Modf(s)
	return time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3).UTC()
}
