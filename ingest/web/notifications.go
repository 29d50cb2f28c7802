package web

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"github.com/veritrail/veritrail/internal/store"
)

// NotificationLog is what the notifications page reads of the notify tier's delivery log: the
// outcomes of a rule's targets, and a page of its deliveries (delivered, pending with their
// last failure, given up on).
type NotificationLog interface {
	TargetOutcomes(ctx context.Context, org string, rule int64) ([]deliverylog.TargetOutcome, error)
	RuleDeliveries(ctx context.Context, org string, rule int64, p store.Page) ([]deliverylog.Delivery, int, error)
}

// deliveriesPerPage is how many of a rule's deliveries a page shows.
const deliveriesPerPage = 20

type ruleView struct {
	Number       int64
	Name         string
	Environments []string
	Triggers     []string
	Targets      []targetView
	// Deliveries are a page of the rule's deliveries, latest first (for admins).
	Deliveries     []deliveryView
	DeliveryPaging paging
}

// deliveryView is a delivery as the page shows it: its outcome as a word and an icon.
type deliveryView struct {
	deliverylog.Delivery
	Target  string // the target's type and address, "" when the rule no longer has it
	Outcome state
}

// targetState is a target's latest outcome: failing, delivering, or nothing sent yet.
func targetState(o *deliverylog.TargetOutcome) state {
	switch {
	case o == nil:
		return state{"No delivery yet", "–", "pending"}
	case o.IsFailing():
		return state{"Failing", "✘", "bad"}
	}
	return state{"Delivering", "✔", "ok"}
}

func deliveryOutcome(s deliverylog.DeliveryState) state {
	switch s {
	case deliverylog.Delivered:
		return state{"Delivered", "✔", "ok"}
	case deliverylog.GivenUp:
		return state{"Given up on", "✘", "bad"}
	}
	return state{"Retrying", "↻", "pending"}
}

type targetView struct {
	Type, URL, Plugin string
	Emails            []string
	Outcome           *deliverylog.TargetOutcome
	// State is the target's latest outcome as a word and an icon.
	State state
}

type notificationsData struct {
	Rules []ruleView
	// Admin says the reader may see the deliveries, whose failures are dead letters (the API's
	// listNotificationDeadLetters needs admin).
	Admin bool
}

// notificationsPage lists the organization's notification rules, their targets with the outcome
// of their last deliveries, and (for admins) a page of each rule's deliveries.
func (s *Site) notificationsPage(c *call) (string, string, any, error) {
	ctx := c.ctx()
	rules, err := s.store.NotificationRules(ctx, c.p.Org.ID)
	if err != nil {
		return "", "", nil, fmt.Errorf("list notification rules: %w", err)
	}
	d := notificationsData{Admin: !c.p.Anonymous && auth.Allows(c.p.Role, auth.PrivAdmin)}
	for _, r := range rules {
		v := ruleView{Number: r.Number, Name: r.Name, Environments: r.Environments, Triggers: r.Triggers}
		targets := make(map[string]string, len(r.Targets))
		for _, t := range r.Targets {
			targets[t.ID] = describeTarget(t.Type, t.URL, t.Plugin, t.Emails)
		}
		var outcomes []deliverylog.TargetOutcome
		if s.notifications != nil {
			if outcomes, err = s.notifications.TargetOutcomes(ctx, c.p.Org.Name, r.Number); err != nil {
				return "", "", nil, fmt.Errorf("read notification outcomes: %w", err)
			}
			if d.Admin {
				param := fmt.Sprintf("deliveries-%d", r.Number)
				list, total, err := s.notifications.RuleDeliveries(ctx, c.p.Org.Name, r.Number,
					store.Page{Page: c.pageParam(param), PerPage: deliveriesPerPage})
				if err != nil {
					return "", "", nil, fmt.Errorf("read deliveries: %w", err)
				}
				v.DeliveryPaging = c.paging(param, deliveriesPerPage, total)
				for _, dl := range list {
					v.Deliveries = append(v.Deliveries, deliveryView{Delivery: dl, Target: targets[dl.Key.Target], Outcome: deliveryOutcome(dl.State)})
				}
			}
		}
		for _, t := range r.Targets {
			tv := targetView{Type: t.Type, URL: t.URL, Plugin: t.Plugin, Emails: t.Emails}
			for i := range outcomes {
				if outcomes[i].Target == t.ID {
					tv.Outcome = &outcomes[i]
				}
			}
			tv.State = targetState(tv.Outcome)
			v.Targets = append(v.Targets, tv)
		}
		d.Rules = append(d.Rules, v)
	}
	return "notifications", "Notifications", d, nil
}

// describeTarget names a target by its type and where it sends.
func describeTarget(typ, url, plugin string, emails []string) string {
	parts := []string{typ}
	for _, p := range append([]string{url, plugin}, emails...) {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " ")
}

// goTime shows a time.Time as the pages show Unix times (the zero time is never).
func goTime(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMicro()) / 1e6
}
