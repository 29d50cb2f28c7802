package notify_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veritrail/veritrail/internal/metrics"
	"github.com/veritrail/veritrail/notify"
	"github.com/veritrail/veritrail/plugins/sdk"
)

// retryWaiting reads the retry queue's depth from reg.
func retryWaiting(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "veritrail_notify_retry_waiting_deliveries" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no retry gauge")
	return 0
}

// TestRetryWaitIsCounted: a delivery waiting for its next attempt counts in the retry queue's
// depth until the wait ends (here: the run is stopped).
func TestRetryWaitIsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.NewNotify(reg)
	failing := notify.StageFunc(func(_ context.Context, d *notify.Delivery) error {
		d.Attempts++
		d.Last = sdk.Retryable(sdk.ReasonServerError, errors.New("503")).(*sdk.Failure)
		return nil
	})
	s := notify.RetryStage{Attempt: failing, Budget: 24 * time.Hour, Now: time.Now, Logger: slog.New(slog.DiscardHandler), Metrics: m,
		NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Exec(ctx, &notify.Delivery{}) }()
	for retryWaiting(t, reg) != 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a stopped wait returned nil")
	}
	if n := retryWaiting(t, reg); n != 0 {
		t.Fatalf("%v waiting after the wait ended", n)
	}
}
