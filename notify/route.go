package notify

import (
	"github.com/veritrail/veritrail/internal/deliverylog"
	"slices"

	"github.com/veritrail/veritrail/plugins/sdk"
)

// Rule is a notification rule as the notify tier sees it: which triggers in which
// environments fire it, and where it sends.
type Rule struct {
	Org          string
	Number       int64
	Name         string
	Environments []string
	Triggers     []sdk.Trigger
	Targets      []sdk.Target
}

// DefaultRoutes maps target types to the catalog names of the built-in notifiers
// (plugins/builtin). PLUGIN targets name their notifier themselves (sdk.Target.Plugin).
func DefaultRoutes() map[sdk.TargetType]string {
	return map[sdk.TargetType]string{
		sdk.TargetWebhook: "webhook",
		sdk.TargetSlack:   "chat",
		sdk.TargetTeams:   "chat",
		sdk.TargetEmail:   "email",
	}
}

// Route returns one pending delivery for every target of every rule that ev fires: a rule
// fires when it lists ev's trigger and ev's environment. rules are the rules of one
// organization. A target whose type has no route gets a delivery anyway, with no notifier:
// it fails as a configuration error and is kept as a dead letter, visible, rather than
// silently skipped.
func Route(ev sdk.Event, rules []Rule, routes map[sdk.TargetType]string) []*Delivery {
	var out []*Delivery
	for _, r := range rules {
		if !slices.Contains(r.Triggers, ev.Trigger) || !slices.Contains(r.Environments, ev.Environment.Name) {
			continue
		}
		for _, t := range r.Targets {
			key := deliverylog.Key{Org: r.Org, Rule: r.Number, Target: t.ID, Event: ev.ID}
			notifier := routes[t.Type]
			if t.Type == sdk.TargetPlugin {
				notifier = t.Plugin
			}
			out = append(out, &Delivery{
				Key:      key,
				Notifier: notifier,
				Notification: sdk.Notification{
					Target: t,
					Payload: sdk.Payload{
						SchemaVersion: sdk.SchemaVersion,
						DeliveryID:    key.DeliveryID(),
						Rule:          sdk.Rule{Org: r.Org, Number: r.Number, Name: r.Name},
						Event:         ev,
					},
				},
			})
		}
	}
	return out
}
