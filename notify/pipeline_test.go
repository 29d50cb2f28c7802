package notify_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/deliverylog/memlog"
	"github.com/veritrail/veritrail/notify"
	"github.com/veritrail/veritrail/plugins/builtin"
	"github.com/veritrail/veritrail/plugins/builtin/webhook"
	"github.com/veritrail/veritrail/plugins/sdk"
)

// notifiers is a fixed catalog.
type notifiers map[string]sdk.Notifier

func (n notifiers) Lookup(name string) (sdk.Notifier, error) {
	if x, ok := n[name]; ok {
		return x, nil
	}
	return nil, fmt.Errorf("no notifier %q", name)
}

// scripted fails with the errors it is given, in order, then succeeds; it counts its calls.
type scripted struct {
	mu    sync.Mutex
	errs  []error
	calls int
}

func (s *scripted) Configure(context.Context, map[string]string) error { return nil }

func (s *scripted) Notify(context.Context, *sdk.Notification) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.errs) == 0 {
		return nil
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	return err
}

// fast retries within a short budget, so tests take milliseconds.
var fast = notify.Config{
	Budget:         2 * time.Second,
	AttemptTimeout: 2 * time.Second,
	InitialBackoff: 5 * time.Millisecond,
	MaxBackoff:     20 * time.Millisecond,
}

func pipeline(t *testing.T, cfg notify.Config, log deliverylog.Log, n notifiers) *notify.Pipeline {
	t.Helper()
	p, err := notify.New(cfg, notify.Deps{Log: log, Notifiers: n})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func event(id string) sdk.Event {
	return sdk.Event{
		ID: id, Trigger: sdk.OnStartedArtifact, OccurredAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Environment: sdk.Environment{Name: "prod"},
		Artifact:    &sdk.Artifact{Name: "web", Fingerprint: "9f86d081", InstancesNow: 1},
	}
}

func rule(targets ...sdk.Target) notify.Rule {
	return notify.Rule{Org: "acme", Number: 3, Name: "prod watch", Environments: []string{"prod"},
		Triggers: []sdk.Trigger{sdk.OnStartedArtifact}, Targets: targets}
}

func onlyOutcome(t *testing.T, log *memlog.Log) deliverylog.TargetOutcome {
	t.Helper()
	all, err := log.TargetOutcomes(context.Background(), "acme", 3)
	if err != nil || len(all) != 1 {
		t.Fatalf("outcomes %+v, %v: want one target", all, err)
	}
	return all[0]
}

func TestRecoveringReceiverGetsTheMessageOnce(t *testing.T) {
	log := memlog.New()
	const failures = 3
	var requests, accepted atomic.Int32
	failingSeen := make(chan bool, failures)
	ids := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids <- r.Header.Get(webhook.HeaderDelivery)
		n := requests.Add(1)
		if n > 1 && n <= failures+1 {
			// The previous attempt's failure is already on record while retries go on.
			all, _ := log.TargetOutcomes(r.Context(), "acme", 3)
			rule := deliverylog.Summarize(all)
			failingSeen <- len(all) == 1 && all[0].IsFailing() && rule.IsFailing != nil && *rule.IsFailing
		}
		if n <= failures {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		accepted.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	hook := webhook.New()
	if err := hook.Configure(context.Background(), map[string]string{"allow_private": "true"}); err != nil {
		t.Fatal(err)
	}
	p := pipeline(t, fast, log, notifiers{"webhook": hook})
	rules := []notify.Rule{rule(sdk.Target{ID: "hook", Type: sdk.TargetWebhook, URL: srv.URL, Secret: "k"})}

	ds, err := p.Notify(context.Background(), event("e1"), rules)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Status != notify.StatusDelivered || ds[0].Attempts != failures+1 {
		t.Fatalf("delivery %+v, want delivered after %d attempts", ds[0], failures+1)
	}
	for range failures {
		if !<-failingSeen {
			t.Fatal("while the receiver failed, the outcome did not read is_failing")
		}
	}
	o := onlyOutcome(t, log)
	if o.IsFailing() || !o.LastSuccessAt.After(o.LastFailureAt) || o.LastFailureReason != sdk.ReasonServerError {
		t.Fatalf("after recovery: %+v, want not failing, success after the last failure", o)
	}
	if r := deliverylog.Summarize([]deliverylog.TargetOutcome{o}); r.IsFailing == nil || *r.IsFailing {
		t.Fatalf("rule outcome %+v after recovery", r)
	}

	// The bus redelivers the event: nothing more is sent.
	ds, err = p.Notify(context.Background(), event("e1"), rules)
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Status != notify.StatusDuplicate {
		t.Fatalf("redelivery: %s, want duplicate", ds[0].Status)
	}
	if requests.Load() != failures+1 || accepted.Load() != 1 {
		t.Fatalf("the receiver got %d requests and accepted %d, want %d and exactly 1", requests.Load(), accepted.Load(), failures+1)
	}
	close(ids)
	first := <-ids
	for id := range ids {
		if id != first {
			t.Fatalf("delivery id changed between attempts: %q then %q", first, id)
		}
	}
}

func TestBudgetExhaustionKeepsADeadLetter(t *testing.T) {
	log := memlog.New()
	errs := make([]error, 1000)
	for i := range errs {
		errs[i] = sdk.Retryable(sdk.ReasonServerError, errors.New("receiver answered 503"))
	}
	n := &scripted{errs: errs}
	cfg := fast
	cfg.Budget = 150 * time.Millisecond
	p := pipeline(t, cfg, log, notifiers{"webhook": n})
	start := time.Now()
	ds, err := p.Notify(context.Background(), event("e1"), []notify.Rule{rule(sdk.Target{ID: "hook", Type: sdk.TargetWebhook})})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > cfg.Budget+time.Second {
		t.Errorf("took %s with a budget of %s", took, cfg.Budget)
	}
	d := ds[0]
	if d.Status != notify.StatusDeadLetter || !d.Exhausted || d.Attempts < 2 {
		t.Fatalf("delivery %s exhausted=%v after %d attempts, want a dead letter after retries", d.Status, d.Exhausted, d.Attempts)
	}
	dead, err := log.ListDeadLetters(context.Background(), "acme", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].Key != d.Key || dead[0].Reason != sdk.ReasonServerError || !dead[0].Exhausted ||
		dead[0].Attempts != d.Attempts || dead[0].Payload.DeliveryID != d.Key.DeliveryID() || dead[0].Payload.Event.Artifact.Name != "web" {
		t.Fatalf("dead letters %+v", dead)
	}
	if o := onlyOutcome(t, log); !o.IsFailing() {
		t.Fatalf("outcome %+v, want failing", o)
	}

	// Redelivery of the event does not start over: the dead letter stays, visible.
	calls := n.calls
	ds, err = p.Notify(context.Background(), event("e1"), []notify.Rule{rule(sdk.Target{ID: "hook", Type: sdk.TargetWebhook})})
	if err != nil || ds[0].Status != notify.StatusDuplicate || n.calls != calls {
		t.Fatalf("redelivery: %v %s with %d more calls", err, ds[0].Status, n.calls-calls)
	}
}

func TestPermanentFailureIsNotRetried(t *testing.T) {
	log := memlog.New()
	n := &scripted{errs: []error{sdk.Permanent(sdk.ReasonClientError, errors.New("receiver answered 404"))}}
	ds, err := pipeline(t, fast, log, notifiers{"webhook": n}).Notify(context.Background(), event("e1"),
		[]notify.Rule{rule(sdk.Target{ID: "hook", Type: sdk.TargetWebhook})})
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Status != notify.StatusDeadLetter || ds[0].Exhausted || n.calls != 1 {
		t.Fatalf("%s exhausted=%v after %d calls, want a dead letter after 1", ds[0].Status, ds[0].Exhausted, n.calls)
	}
	dead, _ := log.ListDeadLetters(context.Background(), "acme", 10)
	if len(dead) != 1 || dead[0].Reason != sdk.ReasonClientError || dead[0].Message == "" {
		t.Fatalf("dead letters %+v", dead)
	}
}

func TestNetworkErrorsAreRetried(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	n := &scripted{errs: []error{refused, sdk.ClassifyRequestError(refused)}}
	ds, err := pipeline(t, fast, memlog.New(), notifiers{"webhook": n}).Notify(context.Background(), event("e1"),
		[]notify.Rule{rule(sdk.Target{ID: "hook", Type: sdk.TargetWebhook})})
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Status != notify.StatusDelivered || ds[0].Attempts != 3 {
		t.Fatalf("%s after %d attempts, want delivered after 3", ds[0].Status, ds[0].Attempts)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	var times []time.Time
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		n := len(times)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	hook := webhook.New()
	if err := hook.Configure(context.Background(), map[string]string{"allow_private": "true"}); err != nil {
		t.Fatal(err)
	}
	cfg := fast
	cfg.Budget = 10 * time.Second
	ds, err := pipeline(t, cfg, memlog.New(), notifiers{"webhook": hook}).Notify(context.Background(), event("e1"),
		[]notify.Rule{rule(sdk.Target{ID: "hook", Type: sdk.TargetWebhook, URL: srv.URL})})
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Status != notify.StatusDelivered || len(times) != 2 {
		t.Fatalf("%s after %d requests", ds[0].Status, len(times))
	}
	if gap := times[1].Sub(times[0]); gap < time.Second {
		t.Fatalf("retried after %s despite Retry-After: 1", gap)
	}
}

func TestRetryAfterBeyondTheBudgetEndsAtOnce(t *testing.T) {
	log := memlog.New()
	n := &scripted{errs: []error{&sdk.Failure{Err: errors.New("receiver answered 429"), Retryable: true,
		Reason: sdk.ReasonRateLimited, RetryAfter: time.Hour}}}
	start := time.Now()
	ds, err := pipeline(t, fast, log, notifiers{"webhook": n}).Notify(context.Background(), event("e1"),
		[]notify.Rule{rule(sdk.Target{ID: "hook", Type: sdk.TargetWebhook})})
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Status != notify.StatusDeadLetter || !ds[0].Exhausted || n.calls != 1 || time.Since(start) > fast.Budget {
		t.Fatalf("%s exhausted=%v after %d calls in %s", ds[0].Status, ds[0].Exhausted, n.calls, time.Since(start))
	}
	if dead, _ := log.ListDeadLetters(context.Background(), "acme", 1); len(dead) != 1 || dead[0].Reason != sdk.ReasonRateLimited {
		t.Fatalf("dead letters %+v", dead)
	}
}

func TestUnknownNotifierIsKeptAsADeadLetter(t *testing.T) {
	log := memlog.New()
	ds, err := pipeline(t, fast, log, notifiers{}).Notify(context.Background(), event("e1"), []notify.Rule{
		rule(sdk.Target{ID: "p", Type: sdk.TargetPlugin, Plugin: "jira"}, sdk.Target{ID: "x", Type: "CARRIER_PIGEON"})})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Status != notify.StatusDeadLetter || d.Last.Reason != sdk.ReasonConfig {
			t.Errorf("%s: %s (%v), want a config dead letter", d.Key, d.Status, d.Last)
		}
	}
	if dead, _ := log.ListDeadLetters(context.Background(), "acme", 10); len(dead) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dead))
	}
}

// blocking holds every attempt until released.
type blocking struct {
	started chan struct{}
	release chan struct{}
}

func (b *blocking) Configure(context.Context, map[string]string) error { return nil }

func (b *blocking) Notify(ctx context.Context, _ *sdk.Notification) error {
	b.started <- struct{}{}
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestConcurrentWorkersDeliverOnce(t *testing.T) {
	log := memlog.New()
	b := &blocking{started: make(chan struct{}, 2), release: make(chan struct{})}
	first := pipeline(t, fast, log, notifiers{"webhook": b})
	second := pipeline(t, fast, log, notifiers{"webhook": b})
	rules := []notify.Rule{rule(sdk.Target{ID: "hook", Type: sdk.TargetWebhook})}

	done := make(chan error, 1)
	go func() {
		_, err := first.Notify(context.Background(), event("e1"), rules)
		done <- err
	}()
	<-b.started
	_, err := second.Notify(context.Background(), event("e1"), rules)
	if !errors.Is(err, notify.ErrInFlight) {
		t.Fatalf("second worker: %v, want ErrInFlight", err)
	}
	close(b.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ds, err := second.Notify(context.Background(), event("e1"), rules)
	if err != nil || ds[0].Status != notify.StatusDuplicate {
		t.Fatalf("after the first worker delivered: %v %s", err, ds[0].Status)
	}
}

// signalling tells when a failure was recorded.
type signalling struct {
	*memlog.Log
	recorded chan<- struct{}
}

func (s signalling) RecordFailure(ctx context.Context, key deliverylog.Key, f deliverylog.Failure) error {
	err := s.Log.RecordFailure(ctx, key, f)
	s.recorded <- struct{}{}
	return err
}

func TestStoppingLeavesTheDeliveryForAnotherRun(t *testing.T) {
	log := memlog.New()
	recorded := make(chan struct{}, 1)
	retry := sdk.Retryable(sdk.ReasonServerError, errors.New("receiver answered 502"))
	n := &scripted{errs: []error{retry}}
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	cfg := fast
	cfg.InitialBackoff, cfg.MaxBackoff = time.Hour, time.Hour // stop during the wait
	cfg.Budget = 2 * time.Hour
	p, err := notify.New(cfg, notify.Deps{Log: signalling{log, recorded}, Notifiers: notifiers{"webhook": n}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	rules := []notify.Rule{rule(sdk.Target{ID: "hook", Type: sdk.TargetWebhook})}

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-recorded // the first attempt failed: the pipeline is now waiting to retry
		cancel()
	}()
	ds, err := p.Notify(ctx, event("e1"), rules)
	if !errors.Is(err, context.Canceled) || ds[0].Status != notify.StatusPending {
		t.Fatalf("stopped run: %v %s, want context.Canceled and still pending", err, ds[0].Status)
	}
	if dead, _ := log.ListDeadLetters(context.Background(), "acme", 10); len(dead) != 0 {
		t.Fatalf("stopping made a dead letter: %+v", dead)
	}

	// Another worker, after the stopped one's lease ran out, delivers it.
	ds, err = p.Notify(context.Background(), event("e1"), rules)
	if !errors.Is(err, notify.ErrInFlight) {
		t.Fatalf("before the lease ran out: %v, want ErrInFlight", err)
	}
	clock.Add(int64(cfg.Budget + cfg.AttemptTimeout + 2*time.Minute))
	ds, err = p.Notify(context.Background(), event("e1"), rules)
	if err != nil || ds[0].Status != notify.StatusDelivered {
		t.Fatalf("after the lease ran out: %v %s", err, ds[0].Status)
	}
}

func TestRoute(t *testing.T) {
	ev := event("e1")
	rules := []notify.Rule{
		{Org: "acme", Number: 1, Environments: []string{"prod", "staging"}, Triggers: []sdk.Trigger{sdk.OnStartedArtifact, sdk.OnExitedArtifact},
			Targets: []sdk.Target{{ID: "a", Type: sdk.TargetWebhook}, {ID: "b", Type: sdk.TargetSlack}, {ID: "c", Type: sdk.TargetTeams},
				{ID: "d", Type: sdk.TargetEmail}, {ID: "e", Type: sdk.TargetPlugin, Plugin: "pager"}}},
		{Org: "acme", Number: 2, Environments: []string{"prod"}, Triggers: []sdk.Trigger{sdk.OnCompliantEnv},
			Targets: []sdk.Target{{ID: "a", Type: sdk.TargetWebhook}}},
		{Org: "acme", Number: 3, Environments: []string{"staging"}, Triggers: []sdk.Trigger{sdk.OnStartedArtifact},
			Targets: []sdk.Target{{ID: "a", Type: sdk.TargetWebhook}}},
	}
	ds := notify.Route(ev, rules, notify.DefaultRoutes())
	want := map[string]string{"a": "webhook", "b": "chat", "c": "chat", "d": "email", "e": "pager"}
	if len(ds) != len(want) {
		t.Fatalf("%d deliveries, want %d (only rule 1 fires)", len(ds), len(want))
	}
	ids := map[string]bool{}
	for _, d := range ds {
		if d.Key.Rule != 1 || d.Key.Event != "e1" || d.Notifier != want[d.Key.Target] || d.Status != notify.StatusPending {
			t.Errorf("delivery %+v", d)
		}
		p := d.Notification.Payload
		if p.SchemaVersion != sdk.SchemaVersion || p.DeliveryID != d.Key.DeliveryID() || p.Rule.Number != 1 || p.Event.ID != "e1" {
			t.Errorf("payload %+v", p)
		}
		ids[p.DeliveryID] = true
	}
	if len(ids) != len(ds) {
		t.Errorf("delivery ids are not distinct: %v", ids)
	}
	if a, b := (deliverylog.Key{Org: "a/b", Rule: 1, Target: "c", Event: "d"}), (deliverylog.Key{Org: "a", Rule: 1, Target: "b/c", Event: "d"}); a.DeliveryID() == b.DeliveryID() {
		t.Error("keys that differ only by where a slash sits share a delivery id")
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []notify.Config{
		{Budget: -time.Second},
		{InitialBackoff: time.Minute, MaxBackoff: time.Second},
		{Multiplier: 0.5},
		{Jitter: 2},
		{Concurrency: -1},
	} {
		if _, err := notify.New(cfg, notify.Deps{Log: memlog.New(), Notifiers: notifiers{}}); err == nil {
			t.Errorf("New accepted %+v", cfg)
		}
	}
	if _, err := notify.New(notify.Config{}, notify.Deps{}); err == nil {
		t.Error("New accepted no log and no notifiers")
	}
}

func TestDefaultRoutesNameTheBuiltins(t *testing.T) {
	have := builtin.Notifiers()
	for typ, name := range notify.DefaultRoutes() {
		if have[name] == nil {
			t.Errorf("target type %s routes to %q, which is no built-in notifier", typ, name)
		}
	}
}
