// Package chat is the built-in notifier for SLACK and MS_TEAMS targets: it posts the summary of
// a payload (sdk.Summarize) to the target's incoming-webhook URL, as Slack Block Kit for Slack and
// as an Adaptive Card message for Microsoft Teams (the format Teams workflows' "post to a
// channel when a webhook request is received" accepts). Incoming-webhook URLs are user input, so
// they go through the same SSRF-guarded client as webhooks.
//
// # Settings
//
//	allow_private  true lets targets resolve to loopback, private and link-local addresses;
//	               default false
//	timeout        bound on one attempt, default 10s
package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/veritrail/veritrail/plugins/sdk"
)

// Notifier delivers to Slack and Teams targets. The zero value is not usable; call New.
type Notifier struct {
	http *sdk.HTTPClient
}

var _ sdk.Notifier = (*Notifier)(nil)

// New returns a chat notifier with the default settings (private addresses refused).
func New() *Notifier {
	return &Notifier{http: sdk.NewHTTPClient()}
}

// Configure applies the settings described in the package comment.
func (n *Notifier) Configure(_ context.Context, settings map[string]string) error {
	if err := n.http.Configure(settings); err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	return nil
}

// Notify makes one post of the message to the target's incoming webhook.
func (n *Notifier) Notify(ctx context.Context, msg *sdk.Notification) error {
	var body any
	switch msg.Target.Type {
	case sdk.TargetSlack:
		body = SlackMessage(msg.Payload)
	case sdk.TargetTeams:
		body = TeamsMessage(msg.Payload)
	default:
		return sdk.Permanent(sdk.ReasonConfig, fmt.Errorf("chat: target type %q is neither %s nor %s", msg.Target.Type, sdk.TargetSlack, sdk.TargetTeams))
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return sdk.Permanent(sdk.ReasonConfig, fmt.Errorf("chat: encode message: %w", err))
	}
	if err := n.http.PostJSON(ctx, msg.Target.URL, raw, http.Header{"User-Agent": {"Veritrail-Chat/1"}}); err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	return nil
}

// Slack limits: a header's text, a section's fields and each field's text.
const (
	slackHeaderMax    = 150
	slackFieldsMax    = 10
	slackFieldTextMax = 2000
)

// SlackMessage renders p for a Slack incoming webhook: the title as notification text and
// header, the facts as section fields, a button to the event's page and the rule and delivery
// ID as context.
func SlackMessage(p sdk.Payload) map[string]any {
	s := sdk.Summarize(p)
	blocks := []map[string]any{{
		"type": "header",
		"text": map[string]any{"type": "plain_text", "text": truncate(s.Title, slackHeaderMax)},
	}}
	for start := 0; start < len(s.Facts); start += slackFieldsMax {
		end := min(start+slackFieldsMax, len(s.Facts))
		var fields []map[string]any
		for _, f := range s.Facts[start:end] {
			fields = append(fields, map[string]any{
				"type": "mrkdwn",
				"text": truncate("*"+slackEscape(f.Label)+"*\n"+slackEscape(f.Value), slackFieldTextMax),
			})
		}
		blocks = append(blocks, map[string]any{"type": "section", "fields": fields})
	}
	if s.URL != "" {
		blocks = append(blocks, map[string]any{
			"type": "actions",
			"elements": []map[string]any{{
				"type": "button",
				"text": map[string]any{"type": "plain_text", "text": "Open in Veritrail"},
				"url":  s.URL,
			}},
		})
	}
	blocks = append(blocks, map[string]any{
		"type": "context",
		"elements": []map[string]any{{
			"type": "mrkdwn",
			"text": slackEscape(fmt.Sprintf("Veritrail · %s · delivery %s", p.Event.Trigger, p.DeliveryID)),
		}},
	})
	return map[string]any{"text": slackEscape(s.Title), "blocks": blocks}
}

// slackEscape escapes the three characters mrkdwn treats as control characters.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// TeamsMessage renders p as a Teams message carrying an Adaptive Card: the title, the facts
// as a fact set and a link to the event's page.
func TeamsMessage(p sdk.Payload) map[string]any {
	s := sdk.Summarize(p)
	facts := make([]map[string]any, 0, len(s.Facts))
	for _, f := range s.Facts {
		facts = append(facts, map[string]any{"title": f.Label, "value": f.Value})
	}
	card := map[string]any{
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
		"type":    "AdaptiveCard",
		"version": "1.4",
		"body": []map[string]any{
			{"type": "TextBlock", "text": s.Title, "weight": "Bolder", "size": "Medium", "wrap": true},
			{"type": "FactSet", "facts": facts},
			{"type": "TextBlock", "text": fmt.Sprintf("Veritrail · %s · delivery %s", p.Event.Trigger, p.DeliveryID),
				"isSubtle": true, "size": "Small", "wrap": true},
		},
	}
	if s.URL != "" {
		card["actions"] = []map[string]any{{"type": "Action.OpenUrl", "title": "Open in Veritrail", "url": s.URL}}
	}
	return map[string]any{
		"type": "message",
		"attachments": []map[string]any{{
			"contentType": "application/vnd.microsoft.card.adaptive",
			"content":     card,
		}},
	}
}

func truncate(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max-1]) + "…"
}
