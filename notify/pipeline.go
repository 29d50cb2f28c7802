package notify

import (
	"context"
	"errors"
	"fmt"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"github.com/veritrail/veritrail/internal/metrics"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/veritrail/veritrail/plugins/sdk"
)

// Config tunes delivery. Zero fields take the defaults below.
type Config struct {
	// Budget is the total time one delivery may take before it is kept as a dead letter.
	Budget time.Duration // default 15m
	// AttemptTimeout bounds one attempt.
	AttemptTimeout time.Duration // default 30s
	// InitialBackoff, MaxBackoff, Multiplier and Jitter shape the waits between attempts:
	// InitialBackoff·Multiplier^n, at most MaxBackoff, each randomized by ±Jitter (0 to 1).
	InitialBackoff time.Duration // default 1s
	MaxBackoff     time.Duration // default 2m
	Multiplier     float64       // default 2
	Jitter         float64       // default 0.3
	// LeaseMargin is added to Budget and AttemptTimeout for the claim's lease, so a live
	// worker's claim never runs out under it.
	LeaseMargin time.Duration // default 1m
	// Concurrency bounds the deliveries of one event that run at once.
	Concurrency int // default 8
	// Routes maps target types to notifier names; default DefaultRoutes().
	Routes map[sdk.TargetType]string
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Budget, 15*time.Minute)
	def(&c.AttemptTimeout, 30*time.Second)
	def(&c.InitialBackoff, time.Second)
	def(&c.MaxBackoff, 2*time.Minute)
	def(&c.LeaseMargin, time.Minute)
	if c.Multiplier == 0 {
		c.Multiplier = 2
	}
	if c.Jitter == 0 {
		c.Jitter = 0.3
	}
	if c.Concurrency == 0 {
		c.Concurrency = 8
	}
	if c.Routes == nil {
		c.Routes = DefaultRoutes()
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{"budget": c.Budget, "attempt timeout": c.AttemptTimeout,
		"initial backoff": c.InitialBackoff, "max backoff": c.MaxBackoff, "lease margin": c.LeaseMargin} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %s is negative", name, d))
		}
	}
	if c.MaxBackoff < c.InitialBackoff {
		errs = append(errs, fmt.Errorf("max backoff %s is below the initial backoff %s", c.MaxBackoff, c.InitialBackoff))
	}
	if c.Multiplier < 1 {
		errs = append(errs, fmt.Errorf("backoff multiplier %g is below 1", c.Multiplier))
	}
	if c.Jitter < 0 || c.Jitter > 1 {
		errs = append(errs, fmt.Errorf("jitter %g is not between 0 and 1", c.Jitter))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency %d is below 1", c.Concurrency))
	}
	return errors.Join(errs...)
}

// Deps are what the pipeline works with.
type Deps struct {
	Log       deliverylog.Log
	Notifiers Notifiers
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// Metrics counts attempts' outcomes and dead letters; nil counts nothing.
	Metrics *metrics.Notify
	// Tracer records each attempt made in a traced context as a span; nil records none.
	Tracer trace.Tracer
}

// Pipeline delivers notifications: at least once, deduplicated by the log, retried within a
// budget, every outcome recorded. It is safe for concurrent use.
type Pipeline struct {
	cfg   Config
	stage Stage
}

// New builds the pipeline.
func New(cfg Config, deps Deps) (*Pipeline, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("notify: config: %w", err)
	}
	if deps.Log == nil || deps.Notifiers == nil {
		return nil, errors.New("notify: a Log and Notifiers are required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	newBackOff := func() backoff.BackOff {
		return &backoff.ExponentialBackOff{
			InitialInterval:     cfg.InitialBackoff,
			RandomizationFactor: cfg.Jitter,
			Multiplier:          cfg.Multiplier,
			MaxInterval:         cfg.MaxBackoff,
		}
	}

	// One delivery, top to bottom: claim it (or find it settled), attempt and record each
	// failure until delivered, permanently failed or out of budget, then settle it.
	stage := MultiStage{
		DedupStage{Log: deps.Log, Lease: cfg.Budget + cfg.AttemptTimeout + cfg.LeaseMargin, Now: deps.Now},
		RetryStage{
			Attempt: MultiStage{
				SendStage{Notifiers: deps.Notifiers, Timeout: cfg.AttemptTimeout, Now: deps.Now, Tracer: deps.Tracer},
				RecordStage{Log: deps.Log, Metrics: deps.Metrics},
			},
			Budget:     cfg.Budget,
			NewBackOff: newBackOff,
			Now:        deps.Now,
			Logger:     deps.Logger,
			Metrics:    deps.Metrics,
		},
		SettleStage{Log: deps.Log, Logger: deps.Logger, Metrics: deps.Metrics},
	}
	return &Pipeline{cfg: cfg, stage: stage}, nil
}

// Deliver takes one delivery through the pipeline. It returns nil once the delivery is
// settled (d.Status is StatusDelivered, StatusDuplicate or StatusDeadLetter) and an error when it could not be
// (the log failed, ctx ended, ErrInFlight): the caller then offers it again later, and
// deduplication makes that safe.
func (p *Pipeline) Deliver(ctx context.Context, d *Delivery) error {
	if d.Status != StatusPending {
		return fmt.Errorf("notify: delivery %s is already %s", d.Key, d.Status)
	}
	return p.stage.Exec(ctx, d)
}

// Notify routes ev to the rules it fires and delivers to all their targets, Concurrency at a
// time. It returns every delivery with its status; the error joins those of the deliveries
// that could not be settled, and the caller offers ev again (acknowledging the bus message only
// on nil), which the log makes safe for the ones that were.
func (p *Pipeline) Notify(ctx context.Context, ev sdk.Event, rules []Rule) ([]*Delivery, error) {
	deliveries := Route(ev, rules, p.cfg.Routes)
	errs := make([]error, len(deliveries))
	var g errgroup.Group
	g.SetLimit(p.cfg.Concurrency)
	for i, d := range deliveries {
		g.Go(func() error {
			errs[i] = p.Deliver(ctx, d)
			return nil
		})
	}
	_ = g.Wait()
	return deliveries, errors.Join(errs...)
}
