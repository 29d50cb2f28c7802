// Package plugintest is the conformance suite every notifier passes, built-in or plugin: it
// delivers a sample of every trigger, checks that a notifier makes exactly one attempt per call
// and classifies every HTTP status the way the host's retry policy expects, and runs each check
// both in-process and through the gRPC contract, so a notifier behaves the same either way.
//
// A notifier's test calls Run with a Suite describing how to build the notifier and a receiver
// for it. Receivers run on loopback, so notifiers with an SSRF guard must be built with private
// addresses allowed.
package plugintest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	plugin "github.com/hashicorp/go-plugin"

	"github.com/veritrail/veritrail/plugins/sdk"
	"github.com/veritrail/veritrail/plugins/sdk/proto"
)

// Suite describes the notifier under test.
type Suite struct {
	// New returns a configured notifier, fresh for every check.
	New func(t *testing.T) sdk.Notifier
	// Receiver starts a receiver for the notifier (cleaned up with t) and returns a target
	// addressed to it and a channel that yields the content of every message it receives.
	Receiver func(t *testing.T) (sdk.Target, <-chan []byte)
	// HTTPTarget, for a notifier that delivers over HTTP, returns a target posting to url. The
	// suite then runs the status-code table and a network failure against receivers of its own.
	HTTPTarget func(url string) sdk.Target
	// BadTarget, when set, is a target the notifier must refuse without retrying (missing URL,
	// no recipients, ...).
	BadTarget *sdk.Target
}

// receiveTimeout bounds waiting for a receiver; generous, since it only matters on failure.
const receiveTimeout = 10 * time.Second

// Run runs the suite, each check once in-process ("direct") and once through the plugin gRPC
// contract ("grpc").
func Run(t *testing.T, s Suite) {
	t.Helper()
	modes := []struct {
		name string
		wrap func(t *testing.T, n sdk.Notifier) sdk.Notifier
	}{
		{"direct", func(_ *testing.T, n sdk.Notifier) sdk.Notifier { return n }},
		{"grpc", OverGRPC},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			build := func(t *testing.T) sdk.Notifier { return m.wrap(t, s.New(t)) }
			t.Run("DeliversEveryTrigger", func(t *testing.T) { deliversEveryTrigger(t, s, build) })
			t.Run("CancelledContext", func(t *testing.T) { cancelledContext(t, s, build) })
			t.Run("RejectsUnknownSetting", func(t *testing.T) { rejectsUnknownSetting(t, build) })
			if s.BadTarget != nil {
				t.Run("RefusesBadTarget", func(t *testing.T) { refusesBadTarget(t, s, build) })
			}
			if s.HTTPTarget != nil {
				t.Run("StatusCodes", func(t *testing.T) { statusCodes(t, s, build) })
				t.Run("NetworkError", func(t *testing.T) { networkError(t, s, build) })
			}
		})
	}
}

// OverGRPC serves n through the plugin contract on an in-process connection and returns the
// host's view of it, as the catalog would see a plugin process.
func OverGRPC(t *testing.T, n sdk.Notifier) sdk.Notifier {
	t.Helper()
	// Closing the client asks the server to shut down (go-plugin's controller service), as the
	// host does to a plugin process.
	client, _ := plugin.TestPluginGRPCConn(t, false, proto.PluginSets(sdk.NewServer(n))[proto.ProtocolVersion1])
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(proto.PluginName)
	if err != nil {
		t.Fatalf("dispense %s: %v", proto.PluginName, err)
	}
	nc, ok := raw.(proto.NotifierClient)
	if !ok {
		t.Fatalf("dispensed %T, want proto.NotifierClient", raw)
	}
	return sdk.NewClient(nc)
}

func deliversEveryTrigger(t *testing.T, s Suite, build func(*testing.T) sdk.Notifier) {
	n := build(t)
	target, received := s.Receiver(t)
	for _, trig := range sdk.Triggers() {
		msg := Sample(trig, target)
		ctx, cancel := context.WithTimeout(context.Background(), receiveTimeout)
		err := n.Notify(ctx, msg)
		cancel()
		if err != nil {
			t.Fatalf("%s: Notify: %v", trig, err)
		}
		select {
		case body := <-received:
			if !strings.Contains(string(body), SampleEnvironment) {
				t.Errorf("%s: the message does not name the environment %q:\n%s", trig, SampleEnvironment, body)
			}
		case <-time.After(receiveTimeout):
			t.Fatalf("%s: Notify returned nil but nothing was received", trig)
		}
		select {
		case body := <-received:
			t.Fatalf("%s: one Notify delivered a second message:\n%s", trig, body)
		default:
		}
	}
}

func cancelledContext(t *testing.T, s Suite, build func(*testing.T) sdk.Notifier) {
	n := build(t)
	target, _ := s.Receiver(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := n.Notify(ctx, Sample(sdk.OnStartedArtifact, target))
	if err == nil {
		t.Fatal("Notify with a cancelled context returned nil")
	}
	if f := sdk.Classify(err); !f.Retryable {
		t.Fatalf("a cancelled attempt was classified permanent (%s): the host could not retry it after a restart", f.Reason)
	}
}

func rejectsUnknownSetting(t *testing.T, build func(*testing.T) sdk.Notifier) {
	n := build(t)
	if err := n.Configure(context.Background(), map[string]string{"no_such_setting": "1"}); err == nil {
		t.Fatal("Configure accepted an unknown setting")
	}
}

func refusesBadTarget(t *testing.T, s Suite, build func(*testing.T) sdk.Notifier) {
	n := build(t)
	err := n.Notify(context.Background(), Sample(sdk.OnStartedArtifact, *s.BadTarget))
	if err == nil {
		t.Fatal("Notify to a bad target returned nil")
	}
	if f := sdk.Classify(err); f.Retryable {
		t.Fatalf("a bad target was classified retryable (%s): %v", f.Reason, err)
	}
}

// StatusCase is one row of the HTTP classification table.
type StatusCase struct {
	Code       int
	RetryAfter string // Retry-After header the receiver sends, if any
	OK         bool
	Retryable  bool
	// WantRetryAfter is the delay the classification must carry.
	WantRetryAfter time.Duration
}

// StatusCases is what every HTTP notifier must answer: success for 2xx; retry for 5xx and 429,
// honouring Retry-After; no retry for redirects and other 4xx (408 included, as the issue
// specifies).
var StatusCases = []StatusCase{
	{Code: 200, OK: true},
	{Code: 201, OK: true},
	{Code: 204, OK: true},
	{Code: 301},
	{Code: 400},
	{Code: 401},
	{Code: 403},
	{Code: 404},
	{Code: 408},
	{Code: 409},
	{Code: 429, Retryable: true},
	{Code: 429, RetryAfter: "3", Retryable: true, WantRetryAfter: 3 * time.Second},
	{Code: 500, Retryable: true},
	{Code: 502, Retryable: true},
	{Code: 503, Retryable: true},
	{Code: 503, RetryAfter: "120", Retryable: true, WantRetryAfter: 2 * time.Minute},
	{Code: 504, Retryable: true},
}

func statusCodes(t *testing.T, s Suite, build func(*testing.T) sdk.Notifier) {
	n := build(t)
	for _, c := range StatusCases {
		name := fmt.Sprint(c.Code)
		if c.RetryAfter != "" {
			name += " Retry-After " + c.RetryAfter
		}
		t.Run(name, func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				if c.RetryAfter != "" {
					w.Header().Set("Retry-After", c.RetryAfter)
				}
				if c.Code == http.StatusMovedPermanently {
					w.Header().Set("Location", "/moved")
				}
				w.WriteHeader(c.Code)
			}))
			defer srv.Close()
			err := n.Notify(context.Background(), Sample(sdk.OnStartedArtifact, s.HTTPTarget(srv.URL+"/hook")))
			if got := hits.Load(); got != 1 {
				t.Fatalf("the receiver got %d requests for one Notify; retries are the host's", got)
			}
			if c.OK {
				if err != nil {
					t.Fatalf("Notify = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Notify = nil, want a failure")
			}
			f := sdk.Classify(err)
			if f.Retryable != c.Retryable {
				t.Fatalf("retryable = %v (%s), want %v: %v", f.Retryable, f.Reason, c.Retryable, err)
			}
			if f.RetryAfter != c.WantRetryAfter {
				t.Fatalf("retry after = %v, want %v", f.RetryAfter, c.WantRetryAfter)
			}
		})
	}
}

func networkError(t *testing.T, s Suite, build func(*testing.T) sdk.Notifier) {
	n := build(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connection refused
	ctx, cancel := context.WithTimeout(context.Background(), receiveTimeout)
	defer cancel()
	err = n.Notify(ctx, Sample(sdk.OnStartedArtifact, s.HTTPTarget("http://"+addr+"/hook")))
	if err == nil {
		t.Fatal("Notify to a closed port returned nil")
	}
	if f := sdk.Classify(err); !f.Retryable {
		t.Fatalf("a refused connection was classified permanent (%s): %v", f.Reason, err)
	}
}
