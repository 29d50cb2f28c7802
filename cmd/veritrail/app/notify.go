package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/evaluate"
	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/health"
	"github.com/veritrail/veritrail/internal/metrics"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
	"github.com/veritrail/veritrail/notify/tier"
)

// NotifyGroup is the consumer group of the notify tier.
const NotifyGroup = "veritrail-notify"

// NotifyConfig is the notify tier's section.
type NotifyConfig struct {
	// Notifiers: the catalog file, the plugin directory, and whether webhooks may reach
	// private addresses.
	Notifiers tier.NotifiersConfig
	// Tier tunes delivery (budget, backoff, concurrency). Its BaseURL defaults to the ingest
	// tier's.
	Tier tier.Config
}

// StartNotify runs the notify tier on Kafka and PostgreSQL.
func StartNotify(ctx context.Context, cfg Config) (*Running, error) {
	log := logger(cfg)
	r, ctx := newRunning(ctx)
	fail := func(err error) (*Running, error) {
		_ = r.Close()
		return nil, err
	}
	reg := metrics.NewRegistry()
	notifyMetrics := metrics.NewNotify(reg)
	// The catalog first: a plugin that does not match its pin stops the start before anything runs.
	if err := startCatalog(ctx, r, cfg, notifyMetrics); err != nil {
		return fail(err)
	}
	st, _, err := openPostgres(ctx, r, cfg)
	if err != nil {
		return fail(err)
	}
	if err := kafkabus.EnsureTopics(ctx, cfg.Kafka, contract.TopicTriggers); err != nil {
		return fail(err)
	}
	kcfg := cfg.Kafka
	if kcfg.ConsumerGroup == "" {
		kcfg.ConsumerGroup = NotifyGroup
	}
	sub, err := kafkabus.NewSubscriber(kcfg, watermill.NewSlogLogger(log))
	if err != nil {
		return fail(err)
	}
	if err := runNotify(ctx, r, cfg, st, sub, notifyMetrics, log); err != nil {
		return fail(err)
	}
	busPing := health.PingFunc(kafkabus.Pinger(cfg.Kafka, contract.TopicTriggers))
	op := newOperator(cfg, reg, st, []health.Check{{Name: "store", Pinger: st}, {Name: "bus", Pinger: busPing}}, log)
	if err := serveAdmin(ctx, r, cfg, op, log); err != nil {
		return fail(err)
	}
	return r, nil
}

// startCatalog builds the notifier catalog (built-ins configured, plugins checked against
// their pins) and makes it the process's.
func startCatalog(ctx context.Context, r *Running, cfg Config, m *metrics.Notify) error {
	ncfg := cfg.Notify.Notifiers
	ncfg.Metrics = m
	ncfg.Log = logger(cfg)
	cat, err := tier.Notifiers(ctx, ncfg)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	r.Catalog = cat
	r.onClose(cat.Close)
	return nil
}

// runNotify consumes the trigger topic and delivers what it carries (see tier.Tier.Run).
func runNotify(ctx context.Context, r *Running, cfg Config, st *sqlstore.Store, sub message.Subscriber, m *metrics.Notify, log *slog.Logger) error {
	tcfg := cfg.Notify.Tier
	if tcfg.BaseURL == "" {
		tcfg.BaseURL = cfg.Ingest.BaseURL
	}
	nt, err := tier.New(tcfg, tier.Deps{Rules: st, Log: st, Notifiers: r.Catalog, Logger: log, Metrics: m,
		Tracer: tracer(cfg, "notify")})
	if err != nil {
		return err
	}
	msgs, err := sub.Subscribe(ctx, contract.TopicTriggers)
	if err != nil {
		return fmt.Errorf("notify: subscribe to %s: %w", contract.TopicTriggers, err)
	}
	r.onClose(sub.Close)
	r.group.Go(func() error {
		nt.Run(ctx, msgs)
		if ctx.Err() == nil {
			return fmt.Errorf("notify: the subscription to %s ended", contract.TopicTriggers)
		}
		return nil
	})
	return nil
}

// runRelay publishes the trigger outbox on pub; the returned function wakes it (the
// evaluator's Triggered hook).
func runRelay(ctx context.Context, r *Running, cfg Config, st store.TriggerOutbox, pub message.Publisher, log *slog.Logger) func() {
	relay := evaluate.NewRelay(cfg.Relay, st, pub, log)
	r.group.Go(func() error { return relay.Run(ctx) })
	return relay.Wake
}
