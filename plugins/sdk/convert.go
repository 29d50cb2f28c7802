package sdk

import (
	"errors"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk/proto"
)

// The conversions between the SDK's types and the wire types. Times travel as UNIX nanoseconds,
// with 0 for the zero time.

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func notificationToProto(n *Notification) *proto.NotifyRequest {
	return &proto.NotifyRequest{
		Target:  targetToProto(n.Target),
		Payload: payloadToProto(n.Payload),
		Attempt: int32(n.Attempt),
	}
}

func notificationFromProto(r *proto.NotifyRequest) (*Notification, error) {
	if r.GetPayload() == nil || r.GetTarget() == nil {
		return nil, errors.New("notify request without target or payload")
	}
	return &Notification{
		Target:  targetFromProto(r.GetTarget()),
		Payload: payloadFromProto(r.GetPayload()),
		Attempt: int(r.GetAttempt()),
	}, nil
}

func targetToProto(t Target) *proto.Target {
	return &proto.Target{
		Id:         t.ID,
		Type:       string(t.Type),
		Url:        t.URL,
		Secret:     t.Secret,
		Recipients: t.Recipients,
		Plugin:     t.Plugin,
		Params:     t.Params,
	}
}

func targetFromProto(t *proto.Target) Target {
	return Target{
		ID:         t.GetId(),
		Type:       TargetType(t.GetType()),
		URL:        t.GetUrl(),
		Secret:     t.GetSecret(),
		Recipients: t.GetRecipients(),
		Plugin:     t.GetPlugin(),
		Params:     t.GetParams(),
	}
}

func payloadToProto(p Payload) *proto.Payload {
	e := p.Event
	out := &proto.Payload{
		SchemaVersion: int32(p.SchemaVersion),
		DeliveryId:    p.DeliveryID,
		Rule:          &proto.Rule{Org: p.Rule.Org, Number: p.Rule.Number, Name: p.Rule.Name},
		Event: &proto.Event{
			Id:                 e.ID,
			Trigger:            string(e.Trigger),
			OccurredAtUnixNano: unixNano(e.OccurredAt),
			Description:        e.Description,
			Environment: &proto.Environment{
				Name:      e.Environment.Name,
				Type:      e.Environment.Type,
				HtmlUrl:   e.Environment.HTMLURL,
				Compliant: e.Environment.Compliant,
			},
		},
	}
	if s := e.Snapshot; s != nil {
		out.Event.Snapshot = &proto.Snapshot{
			Index:              s.Index,
			Compliant:          s.Compliant,
			ReportedAtUnixNano: unixNano(s.ReportedAt),
			HtmlUrl:            s.HTMLURL,
		}
	}
	if a := e.Artifact; a != nil {
		pa := &proto.Artifact{
			Name:            a.Name,
			Fingerprint:     a.Fingerprint,
			HtmlUrl:         a.HTMLURL,
			Compliant:       a.Compliant,
			InstancesBefore: a.InstancesBefore,
			InstancesNow:    a.InstancesNow,
		}
		for _, pv := range a.Provenance {
			pa.Provenance = append(pa.Provenance, &proto.Provenance{
				Flow:      pv.Flow,
				Trail:     pv.Trail,
				GitCommit: pv.GitCommit,
				CommitUrl: pv.CommitURL,
				BuildUrl:  pv.BuildURL,
				HtmlUrl:   pv.HTMLURL,
				Compliant: pv.Compliant,
			})
		}
		out.Event.Artifact = pa
	}
	return out
}

func payloadFromProto(p *proto.Payload) Payload {
	e := p.GetEvent()
	env := e.GetEnvironment()
	out := Payload{
		SchemaVersion: int(p.GetSchemaVersion()),
		DeliveryID:    p.GetDeliveryId(),
		Rule:          Rule{Org: p.GetRule().GetOrg(), Number: p.GetRule().GetNumber(), Name: p.GetRule().GetName()},
		Event: Event{
			ID:          e.GetId(),
			Trigger:     Trigger(e.GetTrigger()),
			OccurredAt:  fromUnixNano(e.GetOccurredAtUnixNano()),
			Description: e.GetDescription(),
			Environment: Environment{
				Name:      env.GetName(),
				Type:      env.GetType(),
				HTMLURL:   env.GetHtmlUrl(),
				Compliant: env.Compliant,
			},
		},
	}
	if s := e.GetSnapshot(); s != nil {
		out.Event.Snapshot = &Snapshot{
			Index:      s.GetIndex(),
			Compliant:  s.Compliant,
			ReportedAt: fromUnixNano(s.GetReportedAtUnixNano()),
			HTMLURL:    s.GetHtmlUrl(),
		}
	}
	if a := e.GetArtifact(); a != nil {
		sa := &Artifact{
			Name:            a.GetName(),
			Fingerprint:     a.GetFingerprint(),
			HTMLURL:         a.GetHtmlUrl(),
			Compliant:       a.Compliant,
			InstancesBefore: a.GetInstancesBefore(),
			InstancesNow:    a.GetInstancesNow(),
		}
		for _, pv := range a.GetProvenance() {
			sa.Provenance = append(sa.Provenance, Provenance{
				Flow:      pv.GetFlow(),
				Trail:     pv.GetTrail(),
				GitCommit: pv.GetGitCommit(),
				CommitURL: pv.GetCommitUrl(),
				BuildURL:  pv.GetBuildUrl(),
				HTMLURL:   pv.GetHtmlUrl(),
				Compliant: pv.Compliant,
			})
		}
		out.Event.Artifact = sa
	}
	return out
}

func failureToProto(f Failure) *proto.Failure {
	msg := "delivery failed"
	if f.Err != nil {
		msg = f.Err.Error()
	}
	return &proto.Failure{
		Message:      msg,
		Retryable:    f.Retryable,
		Reason:       f.Reason,
		RetryAfterMs: f.RetryAfter.Milliseconds(),
	}
}

func failureFromProto(f *proto.Failure) *Failure {
	return &Failure{
		Err:        errors.New(f.GetMessage()),
		Retryable:  f.GetRetryable(),
		Reason:     f.GetReason(),
		RetryAfter: time.Duration(f.GetRetryAfterMs()) * time.Millisecond,
	}
}
