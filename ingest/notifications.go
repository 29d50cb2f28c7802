package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"net/http"
	"net/mail"
	"net/netip"
	"regexp"
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/plugins/sdk/safehttp"
)

// NotificationLog is what the API reads of the notify tier's delivery log: each target's
// outcomes, and the dead letters admins need to see. The store implements it.
type NotificationLog interface {
	deliverylog.Outcomes
	RuleDeadLetters(ctx context.Context, org string, rule int64, limit int) ([]deliverylog.DeadLetter, error)
	// RuleDeliveries pages a rule's deliveries, latest first (the web UI's notifications page).
	RuleDeliveries(ctx context.Context, org string, rule int64, p store.Page) ([]deliverylog.Delivery, int, error)
}

// NotificationTargetInput is one target of a rule. webhook is the URL of a WEBHOOK target, the
// incoming-webhook URL of a SLACK or MS_TEAMS target, and what a PLUGIN target's plugin posts
// to (if it posts anywhere); secret (WEBHOOK only) signs the requests and is never shown.
type NotificationTargetInput struct {
	Type    string            `json:"type" enum:"WEBHOOK,SLACK,MS_TEAMS,EMAIL,PLUGIN"`
	Webhook string            `json:"webhook,omitempty" required:"false" doc:"URL of a WEBHOOK, SLACK or MS_TEAMS target (optional for PLUGIN)"`
	Secret  string            `json:"secret,omitempty" required:"false" writeOnly:"true" doc:"WEBHOOK only: signs each request (X-Veritrail-Signature); never shown"`
	Emails  []string          `json:"emails,omitempty" required:"false" nullable:"true" doc:"EMAIL only: the recipients"`
	Plugin  string            `json:"plugin,omitempty" required:"false" doc:"PLUGIN only: the plugin's name in the notify tier's catalog"`
	Context map[string]string `json:"context,omitempty" required:"false" doc:"extra parameters: Slack's channel_id, channel_name, team_id; anything a plugin reads"`
}

// EnvironmentNotificationInput is the body of create and update environment notification.
type EnvironmentNotificationInput struct {
	Name         string                    `json:"name" maxLength:"200"`
	Environments []string                  `json:"environments" doc:"names of the environments the rule watches"`
	Triggers     []string                  `json:"triggers" doc:"ON_STARTED_ARTIFACT, ON_EXITED_ARTIFACT, ON_SCALED_ARTIFACT, ON_ALLOWED_ARTIFACT, ON_NON_COMPLIANT_ENV, ON_COMPLIANT_ENV"`
	Targets      []NotificationTargetInput `json:"targets"`
}

// NotificationTargetView is a target as the API shows it, with its own outcomes.
type NotificationTargetView struct {
	ID                string            `json:"id"`
	Type              string            `json:"type"`
	Webhook           string            `json:"webhook,omitempty"`
	Emails            []string          `json:"emails,omitempty"`
	Plugin            string            `json:"plugin,omitempty"`
	Context           map[string]string `json:"context,omitempty"`
	HasSecret         bool              `json:"has_secret"`
	LastSuccessAt     *float64          `json:"last_success_at"`
	LastFailureAt     *float64          `json:"last_failure_at"`
	IsFailing         *bool             `json:"is_failing"`
	LastFailureReason string            `json:"last_failure_reason,omitempty"`
}

// EnvironmentNotificationView is an environment notification (and, with flows, an action).
type EnvironmentNotificationView struct {
	Name                  string                   `json:"name"`
	Type                  string                   `json:"type"`
	Number                int64                    `json:"number"`
	Environments          []string                 `json:"environments"`
	Triggers              []string                 `json:"triggers"`
	Targets               []NotificationTargetView `json:"targets"`
	CreatedBy             string                   `json:"created_by"`
	IsCreatedFromSlackApp bool                     `json:"is_created_from_slack_app"`
	LastModifiedAt        float64                  `json:"last_modified_at"`
	IsFailing             *bool                    `json:"is_failing"`
	LastSuccessTimestamp  *float64                 `json:"last_success_timestamp"`
	LastFailureTimestamp  *float64                 `json:"last_failure_timestamp"`
	CreatedAt             *float64                 `json:"created_at"`
}

// ActionView is an item of the actions list: an environment notification with the flows and
// environments it is for.
type ActionView struct {
	EnvironmentNotificationView
	Flows []string `json:"flows"`
}

// DeadLetterView is a delivery that was given up on.
type DeadLetterView struct {
	DeliveryID      string  `json:"delivery_id"`
	EventID         string  `json:"event_id"`
	Trigger         string  `json:"trigger"`
	TargetID        string  `json:"target_id"`
	Notifier        string  `json:"notifier"`
	FailedAt        float64 `json:"failed_at"`
	Attempts        int     `json:"attempts"`
	Reason          string  `json:"reason"`
	Message         string  `json:"message"`
	Retryable       bool    `json:"retryable"`
	BudgetExhausted bool    `json:"budget_exhausted"`
	// Payload is what the notifier was given, as the webhook sends it (the target's secret is
	// not part of it).
	Payload json.RawMessage `json:"payload"`
}

// NotificationPath names an environment notification rule.
type NotificationPath struct {
	Org    string `path:"org" doc:"Organization name"`
	Number int64  `path:"notification_number" minimum:"1"`
}

// notificationType is the type of every rule these endpoints manage.
const notificationType = "ENV"

var pluginNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// notificationRule validates a create or update body into the rule to publish. Every problem
// is reported at once, named by its field.
func (a *API) notificationRule(ctx context.Context, p *Principal, b EnvironmentNotificationInput) (*contract.NotificationRule, error) {
	c := checker{}
	c.name("name", b.Name, nil, "")
	if len(b.Environments) == 0 {
		c["environments"] = "List should have at least 1 item"
	}
	for i, name := range b.Environments {
		if _, err := lookup(ctx, a, p, func() (store.Environment, error) { return a.store.EnvironmentByName(ctx, p.Org.ID, name) }); err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				return nil, a.internal(ctx, "look up environment", err)
			}
			c[fmt.Sprintf("environments[%d]", i)] = fmt.Sprintf("Environment named '%s' does not exist for organization '%s'", name, p.Org.Name)
		}
	}
	if len(b.Triggers) == 0 {
		c["triggers"] = "List should have at least 1 item"
	}
	for i, t := range b.Triggers {
		if !slices.Contains(contract.Triggers(), t) {
			c[fmt.Sprintf("triggers[%d]", i)] = fmt.Sprintf("Input should be one of %q [input: %s]", contract.Triggers(), t)
		}
	}
	if len(b.Targets) == 0 {
		c["targets"] = "List should have at least 1 item"
	}
	rule := &contract.NotificationRule{Name: b.Name, Environments: dedupe(b.Environments), Triggers: dedupe(b.Triggers)}
	ids := map[string]int{}
	for i, t := range b.Targets {
		field := fmt.Sprintf("targets[%d]", i)
		target := checkTarget(c, field, t)
		if _, bad := c[field+".webhook"]; !bad && (t.Type == "WEBHOOK" || t.Type == "SLACK" || t.Type == "MS_TEAMS") {
			if msg := a.targetAddressProblem(ctx, t.Webhook); msg != "" {
				c[field+".webhook"] = msg
			}
		}
		if prev, dup := ids[target.ID]; dup {
			c[fmt.Sprintf("targets[%d]", i)] = fmt.Sprintf("The same target as targets[%d]", prev)
		}
		ids[target.ID] = i
		rule.Targets = append(rule.Targets, target)
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return rule, nil
}

func checkTarget(c checker, field string, t NotificationTargetInput) contract.NotificationTarget {
	checkURL := func(required bool) {
		if t.Webhook == "" {
			if required {
				c[field+".webhook"] = "Field required"
			}
			return
		}
		if _, err := safehttp.ParseURL(t.Webhook); err != nil {
			c[field+".webhook"] = "Input should be an http or https URL: " + err.Error()
		}
	}
	only := func(name string, set bool, types string) {
		if set {
			c[field+"."+name] = "Only " + types + " targets take " + name
		}
	}
	switch t.Type {
	case "WEBHOOK", "SLACK", "MS_TEAMS":
		checkURL(true)
	case "EMAIL":
		if len(t.Emails) == 0 {
			c[field+".emails"] = "List should have at least 1 item"
		}
		for i, e := range t.Emails {
			if _, err := mail.ParseAddress(e); err != nil {
				c[fmt.Sprintf("%s.emails[%d]", field, i)] = "Input should be an e-mail address [input: " + e + "]"
			}
		}
	case "PLUGIN":
		checkURL(false)
		if !pluginNameRE.MatchString(t.Plugin) {
			c[field+".plugin"] = patternError(pluginNameRE.String(), t.Plugin)
		}
	default:
		c[field+".type"] = fmt.Sprintf("Input should be 'WEBHOOK', 'SLACK', 'MS_TEAMS', 'EMAIL' or 'PLUGIN' [input: %s]", t.Type)
	}
	only("secret", t.Secret != "" && t.Type != "WEBHOOK", "WEBHOOK")
	only("emails", len(t.Emails) > 0 && t.Type != "EMAIL", "EMAIL")
	only("plugin", t.Plugin != "" && t.Type != "PLUGIN", "PLUGIN")
	if t.Type == "EMAIL" && t.Webhook != "" {
		c[field+".webhook"] = "EMAIL targets take emails, not a webhook"
	}
	return contract.NotificationTarget{ID: targetID(t), Type: t.Type, URL: t.Webhook, Secret: t.Secret, Emails: t.Emails,
		Plugin: t.Plugin, Context: t.Context}
}

// targetResolveTimeout bounds the name resolution of one target when a rule is written.
const targetResolveTimeout = 2 * time.Second

// targetAddressProblem refuses, unless private targets are allowed, a webhook or chat URL the
// notify tier would refuse to connect to: a literal address that is not public (safehttp.Public)
// or a host name whose every address is not. A name that does not resolve now is accepted (DNS
// may be down for a moment, or the name may be created later): the dialler checks every address
// again at delivery, where DNS rebinding cannot pass. Plugins are not checked here; they
// configure their own guard.
func (a *API) targetAddressProblem(ctx context.Context, raw string) string {
	if a.cfg.AllowPrivateTargets {
		return ""
	}
	u, err := safehttp.ParseURL(raw)
	if err != nil {
		return "" // worded by checkTarget
	}
	host := u.Hostname()
	if addr, err := netip.ParseAddr(host); err == nil {
		if !safehttp.Public(addr) {
			return fmt.Sprintf("Input should be a URL of a public address; %s is not one (private targets are not allowed) [input: %s]", addr, echo(raw))
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, targetResolveTimeout)
	defer cancel()
	addrs, err := a.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return ""
	}
	for _, addr := range addrs {
		if safehttp.Public(addr) {
			return ""
		}
	}
	return fmt.Sprintf("Input should be a URL of a public address; %s resolves only to addresses that are not (%s; private targets are not allowed) [input: %s]",
		host, addrs[0].Unmap(), echo(raw))
}

// targetID derives a target's ID from where it sends (its secret aside), so that a target kept
// across an update keeps its ID, and with it its outcomes and its deliveries' deduplication.
func targetID(t NotificationTargetInput) string {
	b, _ := json.Marshal(struct { // a struct of strings, slices and a map encodes without error, map keys sorted
		Type, Webhook, Plugin string
		Emails                []string
		Context               map[string]string
	}{t.Type, t.Webhook, t.Plugin, t.Emails, t.Context})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

func dedupe(s []string) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func optionalSeconds(t time.Time) *float64 {
	if t.IsZero() {
		return nil
	}
	s := float64(t.UnixMicro()) / 1e6
	return &s
}

// notificationView shows a rule with its targets' outcomes and the rule's, derived from them.
func (a *API) notificationView(ctx context.Context, p *Principal, r store.NotificationRule) (EnvironmentNotificationView, error) {
	created := r.CreatedAt
	v := EnvironmentNotificationView{Name: r.Name, Type: notificationType, Number: r.Number, Environments: nonNil(r.Environments),
		Triggers: nonNil(r.Triggers), Targets: []NotificationTargetView{}, CreatedBy: r.CreatedBy, LastModifiedAt: r.LastModifiedAt,
		CreatedAt: &created}
	var outcomes []deliverylog.TargetOutcome
	if a.notifications != nil && r.Number > 0 {
		var err error
		if outcomes, err = a.notifications.TargetOutcomes(ctx, p.Org.Name, r.Number); err != nil {
			return v, a.internal(ctx, "read notification outcomes", err)
		}
	}
	var current []deliverylog.TargetOutcome // the rule's outcome is its current targets'
	for _, t := range r.Targets {
		tv := NotificationTargetView{ID: t.ID, Type: t.Type, Webhook: t.URL, Emails: t.Emails, Plugin: t.Plugin, Context: t.Context,
			HasSecret: t.Secret != ""}
		for _, o := range outcomes {
			if o.Target == t.ID {
				failing := o.IsFailing()
				tv.LastSuccessAt, tv.LastFailureAt, tv.IsFailing = optionalSeconds(o.LastSuccessAt), optionalSeconds(o.LastFailureAt), &failing
				if failing {
					tv.LastFailureReason = o.LastFailureReason
				}
				current = append(current, o)
			}
		}
		v.Targets = append(v.Targets, tv)
	}
	sum := deliverylog.Summarize(current)
	v.IsFailing = sum.IsFailing
	if sum.LastSuccessAt != nil {
		v.LastSuccessTimestamp = optionalSeconds(*sum.LastSuccessAt)
	}
	if sum.LastFailureAt != nil {
		v.LastFailureTimestamp = optionalSeconds(*sum.LastFailureAt)
	}
	return v, nil
}

// notificationRuleByNumber finds a rule for a write or a read; unknown numbers answer 404.
func (a *API) notificationRuleByNumber(ctx context.Context, p *Principal, n int64) (store.NotificationRule, error) {
	r, err := lookup(ctx, a, p, func() (store.NotificationRule, error) { return a.store.NotificationRule(ctx, p.Org.ID, n) })
	if errors.Is(err, store.ErrNotFound) {
		return r, apiError(http.StatusNotFound, "Environment notification number %d does not exist in organization '%s'", n, p.Org.Name)
	}
	if err != nil {
		return r, a.internal(ctx, "look up environment notification", err)
	}
	return r, nil
}

// appliedRule waits for the organization's writes (the rule just published among them) and reads the
// rule back, so that a create answers with the number the evaluator gave it. Past the
// consistency wait the rule is shown as sent, with number 0: it is durable and gets its number
// once the evaluator catches up.
func (a *API) appliedRule(ctx context.Context, p *Principal, rule *contract.NotificationRule) (EnvironmentNotificationView, error) {
	a.awaitWrites(ctx, p)
	stored, err := a.store.NotificationRuleByID(ctx, p.Org.ID, rule.ID)
	if errors.Is(err, store.ErrNotFound) {
		a.log.WarnContext(ctx, "ingest: notification rule not applied within the consistency wait; answering without its number", "rule", rule.ID)
		stored = store.NotificationRule{ID: rule.ID, OrgID: p.Org.ID, Number: rule.Number, Name: rule.Name, Environments: rule.Environments,
			Triggers: rule.Triggers, CreatedBy: p.Name, CreatedAt: now(), LastModifiedAt: now()}
		for _, t := range rule.Targets {
			stored.Targets = append(stored.Targets, store.NotificationTarget{ID: t.ID, Type: t.Type, URL: t.URL, Secret: t.Secret,
				Emails: t.Emails, Plugin: t.Plugin, Context: t.Context})
		}
	} else if err != nil {
		return EnvironmentNotificationView{}, a.internal(ctx, "read environment notification", err)
	}
	return a.notificationView(ctx, p, stored)
}

func (a *API) registerNotifications() {
	type ruleOutput struct {
		Status int
		Body   EnvironmentNotificationView
	}
	type createInput struct {
		OrgPath
		Body EnvironmentNotificationInput
	}
	o := op(http.MethodPost, "/organizations/{org}/environments_notifications", "createEnvironmentNotification", PrivWrite,
		"Create an environment notification rule; answers it with its number", "Notifications")
	o.DefaultStatus = http.StatusCreated
	huma.Register(a.huma, o, func(ctx context.Context, in *createInput) (*ruleOutput, error) {
		p := principalFrom(ctx)
		rule, err := a.notificationRule(ctx, p, in.Body)
		if err != nil {
			return nil, err
		}
		rule.ID = newID()
		if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindNotificationCreated, Notification: rule}); err != nil {
			return nil, err
		}
		v, err := a.appliedRule(ctx, p, rule)
		return &ruleOutput{Status: http.StatusCreated, Body: v}, err
	})

	type updateInput struct {
		NotificationPath
		Body EnvironmentNotificationInput
	}
	huma.Register(a.huma, op(http.MethodPut, "/organizations/{org}/environments_notifications/{notification_number}",
		"updateEnvironmentNotification", PrivWrite, "Replace an environment notification rule", "Notifications"),
		func(ctx context.Context, in *updateInput) (*ruleOutput, error) {
			p := principalFrom(ctx)
			existing, err := a.notificationRuleByNumber(ctx, p, in.Number)
			if err != nil {
				return nil, err
			}
			rule, err := a.notificationRule(ctx, p, in.Body)
			if err != nil {
				return nil, err
			}
			rule.ID, rule.Number = existing.ID, existing.Number
			if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindNotificationUpdated, Notification: rule}); err != nil {
				return nil, err
			}
			v, err := a.appliedRule(ctx, p, rule)
			return &ruleOutput{Status: http.StatusOK, Body: v}, err
		})

	huma.Register(a.huma, op(http.MethodDelete, "/organizations/{org}/environments_notifications/{notification_number}",
		"deleteEnvironmentNotification", PrivWrite, "Delete an environment notification rule", "Notifications"),
		func(ctx context.Context, in *NotificationPath) (*stringOutput, error) {
			p := principalFrom(ctx)
			existing, err := a.notificationRuleByNumber(ctx, p, in.Number)
			if err != nil {
				return nil, err
			}
			rule := &contract.NotificationRule{ID: existing.ID, Number: existing.Number}
			if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindNotificationDeleted, Notification: rule}); err != nil {
				return nil, err
			}
			return &stringOutput{Status: http.StatusOK, Body: fmt.Sprintf("Environment notification %d was deleted", in.Number)}, nil
		})

	huma.Register(a.huma, op(http.MethodGet, "/organizations/{org}/environments_notifications/{notification_number}",
		"getEnvironmentNotification", PrivRead, "Get an environment notification rule with its outcomes", "Notifications"),
		func(ctx context.Context, in *NotificationPath) (*ruleOutput, error) {
			p := principalFrom(ctx)
			r, err := a.notificationRuleByNumber(ctx, p, in.Number)
			if err != nil {
				return nil, err
			}
			v, err := a.notificationView(ctx, p, r)
			return &ruleOutput{Status: http.StatusOK, Body: v}, err
		})

	huma.Register(a.huma, op(http.MethodGet, "/organizations/{org}/environments_notifications", "listEnvironmentNotifications",
		PrivRead, "List environment notification rules", "Notifications"),
		func(ctx context.Context, in *OrgPath) (*listOutput[EnvironmentNotificationView], error) {
			p := principalFrom(ctx)
			views, err := a.notificationViews(ctx, p)
			return &listOutput[EnvironmentNotificationView]{Body: views}, err
		})

	huma.Register(a.huma, op(http.MethodGet, "/actions/{org}", "listActions", PrivRead,
		"List actions: the environment notification rules, with the flows and environments they are for", "Notifications"),
		func(ctx context.Context, in *OrgPath) (*listOutput[ActionView], error) {
			p := principalFrom(ctx)
			views, err := a.notificationViews(ctx, p)
			out := &listOutput[ActionView]{Body: make([]ActionView, len(views))}
			for i, v := range views {
				out.Body[i] = ActionView{EnvironmentNotificationView: v, Flows: []string{}}
			}
			return out, err
		})

	type deadInput struct {
		NotificationPath
		Limit int `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	}
	huma.Register(a.huma, op(http.MethodGet, "/organizations/{org}/environments_notifications/{notification_number}/dead_letters",
		"listNotificationDeadLetters", PrivAdmin,
		"List the rule's deliveries that were given up on (permanent failure or retry budget spent), most recent first", "Notifications"),
		func(ctx context.Context, in *deadInput) (*listOutput[DeadLetterView], error) {
			p := principalFrom(ctx)
			if _, err := a.notificationRuleByNumber(ctx, p, in.Number); err != nil {
				return nil, err
			}
			out := &listOutput[DeadLetterView]{Body: []DeadLetterView{}}
			if a.notifications == nil {
				return out, nil
			}
			dead, err := a.notifications.RuleDeadLetters(ctx, p.Org.Name, in.Number, in.Limit)
			if err != nil {
				return nil, a.internal(ctx, "list dead letters", err)
			}
			for _, d := range dead {
				payload, err := json.Marshal(d.Payload)
				if err != nil {
					return nil, a.internal(ctx, "encode dead letter", err)
				}
				out.Body = append(out.Body, DeadLetterView{DeliveryID: d.Key.DeliveryID(), EventID: d.Key.Event,
					Trigger: string(d.Payload.Event.Trigger), TargetID: d.Key.Target, Notifier: d.Notifier,
					FailedAt: float64(d.At.UnixMicro()) / 1e6, Attempts: d.Attempts, Reason: d.Reason, Message: d.Message, Retryable: d.Retryable,
					BudgetExhausted: d.Exhausted, Payload: payload})
			}
			return out, nil
		})
}

func (a *API) notificationViews(ctx context.Context, p *Principal) ([]EnvironmentNotificationView, error) {
	rules, err := a.store.NotificationRules(ctx, p.Org.ID)
	if err != nil {
		return nil, a.internal(ctx, "list environment notifications", err)
	}
	views := make([]EnvironmentNotificationView, 0, len(rules))
	for _, r := range rules {
		v, err := a.notificationView(ctx, p, r)
		if err != nil {
			return nil, err
		}
		views = append(views, v)
	}
	return views, nil
}
