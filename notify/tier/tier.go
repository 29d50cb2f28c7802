// Package tier is the notify tier: it consumes the triggers the evaluate tier publishes
// (contract.TopicTriggers), matches them with the organization's notification rules and
// delivers them through the notify pipeline. A trigger's message is acked only once the
// pipeline has settled every delivery it routes (delivered, already delivered, or kept as a
// dead letter); until then it is retried, which the delivery log makes safe.
package tier

import (
	"context"
	"errors"
	"fmt"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"log/slog"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/veritrail/veritrail/internal/bus/keyed"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/metrics"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/tracing"
	"github.com/veritrail/veritrail/notify"
)

// Config is the notify tier's configuration.
type Config struct {
	// Pipeline tunes delivery: budget, backoff, attempt timeout.
	Pipeline notify.Config
	// BaseURL prefixes the links in payloads (the web UI's pages); none when empty.
	BaseURL string
	// Concurrency bounds the triggers delivered at once (default 16). Triggers of one
	// environment are delivered one after the other.
	Concurrency int
}

// Rules is what the tier reads from the store: rules by organization, and organization names
// for the payloads.
type Rules interface {
	OrgByID(ctx context.Context, id string) (store.Org, error)
	NotificationRules(ctx context.Context, orgID string) ([]store.NotificationRule, error)
}

// Deps are the tier's collaborators.
type Deps struct {
	Rules     Rules
	Log       deliverylog.Log
	Notifiers notify.Notifiers
	Logger    *slog.Logger
	// Now is the pipeline's clock; nil means time.Now.
	Now func() time.Time
	// Metrics counts deliveries' outcomes; nil counts nothing.
	Metrics *metrics.Notify
	// Tracer continues the trace a trigger's message carries (the change it derives from): a
	// span for the trigger and one for each delivery attempt; nil records none.
	Tracer trace.Tracer
}

// Tier delivers triggers. It is safe for concurrent use.
type Tier struct {
	cfg      Config
	rules    Rules
	pipeline *notify.Pipeline
	log      *slog.Logger
	tracer   trace.Tracer
	// orgNames caches organization names by ID: names do not change.
	orgNames sync.Map
}

// New builds the tier.
func New(cfg Config, d Deps) (*Tier, error) {
	if d.Rules == nil {
		return nil, errors.New("notify tier: a rules reader is required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	p, err := notify.New(cfg.Pipeline, notify.Deps{Log: d.Log, Notifiers: d.Notifiers, Logger: d.Logger, Now: d.Now, Metrics: d.Metrics,
		Tracer: d.Tracer})
	if err != nil {
		return nil, err
	}
	return &Tier{cfg: cfg, rules: d.Rules, pipeline: p, log: d.Logger, tracer: d.Tracer}, nil
}

// Run consumes msgs (a subscription to contract.TopicTriggers) until ctx ends.
func (t *Tier) Run(ctx context.Context, msgs <-chan *message.Message) {
	keyed.Consume(ctx, msgs, keyed.Config{Concurrency: t.cfg.Concurrency, KeyMetadata: contract.MetaPartitionKey}, t.Handle, t.log)
}

// Handle delivers one trigger message to every target of every rule it fires. It returns an
// error when a delivery could not be settled (the store is unreachable, another worker holds
// a claim): the caller offers the message again, and what was settled is not sent twice.
func (t *Tier) Handle(ctx context.Context, msg *message.Message) (err error) {
	if t.tracer != nil {
		if parent := tracing.Extract(ctx, msg.Metadata); trace.SpanContextFromContext(parent).IsValid() {
			var span trace.Span
			ctx, span = t.tracer.Start(parent, "notify.trigger", trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(attribute.String("messaging.message.id", msg.UUID)))
			defer func() {
				if err != nil {
					span.SetStatus(codes.Error, err.Error())
				}
				span.End()
			}()
		}
	}
	tr, err := contract.UnmarshalTrigger(msg.Payload)
	if err != nil {
		// Nothing can ever be delivered from it; holding it would block its environment.
		t.log.Error("notify: dropping an undecodable trigger", "uuid", msg.UUID, "err", err)
		return nil
	}
	org, err := t.orgName(ctx, tr.OrgID)
	if errors.Is(err, store.ErrNotFound) {
		t.log.Error("notify: dropping a trigger of an unknown organization", "trigger", tr.ID, "org_id", tr.OrgID)
		return nil
	}
	if err != nil {
		return err
	}
	stored, err := t.rules.NotificationRules(ctx, tr.OrgID)
	if err != nil {
		return fmt.Errorf("notify: rules of %s: %w", org, err)
	}
	rules := make([]notify.Rule, len(stored))
	for i, r := range stored {
		rules[i] = Rule(org, r)
	}
	deliveries, err := t.pipeline.Notify(ctx, Event(tr, org, t.cfg.BaseURL), rules)
	for _, d := range deliveries {
		t.log.Debug("notify: delivery", "key", d.Key.String(), "status", d.Status.String(), "attempts", d.Attempts)
	}
	return err
}

func (t *Tier) orgName(ctx context.Context, id string) (string, error) {
	if name, ok := t.orgNames.Load(id); ok {
		return name.(string), nil
	}
	o, err := t.rules.OrgByID(ctx, id)
	if err != nil {
		return "", fmt.Errorf("notify: organization %s: %w", id, err)
	}
	t.orgNames.Store(id, o.Name)
	return o.Name, nil
}
