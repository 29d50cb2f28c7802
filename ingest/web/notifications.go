package web

import (
	"context"
	"fmt"
	"time"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/internal/deliverylog"
)

// NotificationLog is what the notifications page reads of the notify tier's delivery log: the
// outcomes of a rule's targets, and the deliveries given up on.
type NotificationLog interface {
	TargetOutcomes(ctx context.Context, org string, rule int64) ([]deliverylog.TargetOutcome, error)
	RuleDeadLetters(ctx context.Context, org string, rule int64, limit int) ([]deliverylog.DeadLetter, error)
}

// deadLetterLimit bounds the dead letters shown per rule.
const deadLetterLimit = 20

type ruleView struct {
	Number       int64
	Name         string
	Environments []string
	Triggers     []string
	Targets      []targetView
	DeadLetters  []deliverylog.DeadLetter
}

type targetView struct {
	Type, URL, Plugin string
	Emails            []string
	Outcome           *deliverylog.TargetOutcome
	Failing           bool
}

type notificationsData struct {
	Rules []ruleView
	// Admin says the reader may see dead letters (the API's listNotificationDeadLetters needs admin).
	Admin bool
}

// notificationsPage lists the organization's notification rules, their targets with the outcome
// of their last deliveries, and (for admins) the deliveries given up on.
func (s *Site) notificationsPage(c *call) (string, string, any, error) {
	ctx := c.ctx()
	rules, err := s.store.NotificationRules(ctx, c.p.Org.ID)
	if err != nil {
		return "", "", nil, fmt.Errorf("list notification rules: %w", err)
	}
	d := notificationsData{Admin: !c.p.Anonymous && auth.Allows(c.p.Role, auth.PrivAdmin)}
	for _, r := range rules {
		v := ruleView{Number: r.Number, Name: r.Name, Environments: r.Environments, Triggers: r.Triggers}
		var outcomes []deliverylog.TargetOutcome
		if s.notifications != nil {
			if outcomes, err = s.notifications.TargetOutcomes(ctx, c.p.Org.Name, r.Number); err != nil {
				return "", "", nil, fmt.Errorf("read notification outcomes: %w", err)
			}
			if d.Admin {
				if v.DeadLetters, err = s.notifications.RuleDeadLetters(ctx, c.p.Org.Name, r.Number, deadLetterLimit); err != nil {
					return "", "", nil, fmt.Errorf("read dead letters: %w", err)
				}
			}
		}
		for _, t := range r.Targets {
			tv := targetView{Type: t.Type, URL: t.URL, Plugin: t.Plugin, Emails: t.Emails}
			for i := range outcomes {
				if outcomes[i].Target == t.ID {
					tv.Outcome = &outcomes[i]
					tv.Failing = outcomes[i].IsFailing()
				}
			}
			v.Targets = append(v.Targets, tv)
		}
		d.Rules = append(d.Rules, v)
	}
	return "notifications", "Notifications", d, nil
}

// goTime shows a time.Time as the pages show Unix times (the zero time is never).
func goTime(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMicro()) / 1e6
}
