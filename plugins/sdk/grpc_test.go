package sdk_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk"
	"github.com/veritrail/veritrail/plugins/sdk/plugintest"
)

// recorder keeps what it was sent and fails as told.
type recorder struct {
	got      []*sdk.Notification
	settings map[string]string
	fail     error
}

func (r *recorder) Configure(_ context.Context, s map[string]string) error {
	if s["bad"] != "" {
		return errors.New("setting bad: not today")
	}
	r.settings = s
	return nil
}

func (r *recorder) Notify(_ context.Context, n *sdk.Notification) error {
	r.got = append(r.got, n)
	return r.fail
}

func TestGRPCRoundTrip(t *testing.T) {
	target := sdk.Target{
		ID: "t1", Type: sdk.TargetPlugin, URL: "https://pager.example/v1/alerts", Secret: "s3cret",
		Recipients: []string{"a@example.com", "b@example.com"}, Plugin: "pager",
		Params: map[string]string{"severity": "critical"},
	}
	for _, trig := range sdk.Triggers() {
		rec := &recorder{}
		n := plugintest.OverGRPC(t, rec)
		want := plugintest.Sample(trig, target)
		want.Attempt = 3
		if err := n.Notify(context.Background(), want); err != nil {
			t.Fatalf("%s: Notify: %v", trig, err)
		}
		if len(rec.got) != 1 || !reflect.DeepEqual(rec.got[0], want) {
			t.Fatalf("%s: the plugin received\n%+v\nwant\n%+v", trig, rec.got, want)
		}
	}
}

func TestGRPCKeepsClassification(t *testing.T) {
	for _, fail := range []error{
		&sdk.Failure{Err: errors.New("slow down"), Retryable: true, Reason: sdk.ReasonRateLimited, RetryAfter: 1500 * time.Millisecond},
		sdk.Permanent(sdk.ReasonClientError, errors.New("receiver answered 404")),
		errors.New("an error nobody classified"),
	} {
		n := plugintest.OverGRPC(t, &recorder{fail: fail})
		err := n.Notify(context.Background(), plugintest.Sample(sdk.OnCompliantEnv, sdk.Target{Type: sdk.TargetPlugin}))
		got, want := sdk.Classify(err), sdk.Classify(fail)
		if got.Retryable != want.Retryable || got.Reason != want.Reason || got.RetryAfter != want.RetryAfter {
			t.Errorf("over gRPC %+v became %+v", want, got)
		}
		if !strings.Contains(err.Error(), want.Err.Error()) {
			t.Errorf("message %q lost %q", err, want.Err)
		}
	}
}

func TestGRPCConfigure(t *testing.T) {
	rec := &recorder{}
	n := plugintest.OverGRPC(t, rec)
	if err := n.Configure(context.Background(), map[string]string{"url": "x"}); err != nil {
		t.Fatal(err)
	}
	if rec.settings["url"] != "x" {
		t.Fatalf("settings %v did not arrive", rec.settings)
	}
	err := n.Configure(context.Background(), map[string]string{"bad": "1"})
	if err == nil || err.Error() != "setting bad: not today" {
		t.Fatalf("Configure error = %v, want the plugin's own message", err)
	}
}

func TestCancelledCallOverGRPC(t *testing.T) {
	n := plugintest.OverGRPC(t, &recorder{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := n.Notify(ctx, plugintest.Sample(sdk.OnCompliantEnv, sdk.Target{Type: sdk.TargetPlugin}))
	if f := sdk.Classify(err); err == nil || !f.Retryable || f.Reason != sdk.ReasonCanceled {
		t.Fatalf("cancelled call: %v (%+v), want retryable %q", err, f, sdk.ReasonCanceled)
	}
}
