package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/veritrail/veritrail/plugins/builtin/webhook"
	"github.com/veritrail/veritrail/plugins/sdk"
	"github.com/veritrail/veritrail/plugins/sdk/plugintest"
)

func configured(t *testing.T) sdk.Notifier {
	n := webhook.New()
	if err := n.Configure(context.Background(), map[string]string{"allow_private": "true", "timeout": "5s"}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConformance(t *testing.T) {
	plugintest.Run(t, plugintest.Suite{
		New: configured,
		Receiver: func(t *testing.T) (sdk.Target, <-chan []byte) {
			got := make(chan []byte, 16)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				got <- body
			}))
			t.Cleanup(srv.Close)
			return sdk.Target{ID: "1", Type: sdk.TargetWebhook, URL: srv.URL + "/hook", Secret: "s"}, got
		},
		HTTPTarget: func(u string) sdk.Target { return sdk.Target{ID: "1", Type: sdk.TargetWebhook, URL: u} },
		BadTarget:  &sdk.Target{ID: "1", Type: sdk.TargetWebhook, URL: "ftp://example.com/"},
	})
}

type request struct {
	header http.Header
	body   []byte
}

func TestSignedVersionedPayload(t *testing.T) {
	const secret = "correct horse battery staple"
	got := make(chan request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- request{r.Header.Clone(), body}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()

	msg := plugintest.Sample(sdk.OnStartedArtifact, sdk.Target{Type: sdk.TargetWebhook, URL: srv.URL, Secret: secret})
	if err := configured(t).Notify(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	r := <-got

	// The receiver checks the signature its own way, from the documented recipe.
	sig := r.header.Get(webhook.HeaderSignature)
	fields := map[string]string{}
	for _, kv := range strings.Split(sig, ",") {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = v
	}
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(fields["t"] + "." + string(r.body)))
	if want := hex.EncodeToString(h.Sum(nil)); fields["v1"] != want {
		t.Fatalf("signature %q, want v1=%s", sig, want)
	}
	if err := webhook.Verify([]byte(secret), sig, r.body, time.Now(), time.Minute); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if err := webhook.Verify([]byte("wrong"), sig, r.body, time.Now(), time.Minute); err == nil {
		t.Fatal("Verify accepted the wrong secret")
	}
	if err := webhook.Verify([]byte(secret), sig, append(r.body, ' '), time.Now(), time.Minute); err == nil {
		t.Fatal("Verify accepted a changed body")
	}
	if err := webhook.Verify([]byte(secret), sig, r.body, time.Now().Add(time.Hour), time.Minute); err == nil {
		t.Fatal("Verify accepted a replay an hour later")
	}

	for k, want := range map[string]string{
		"Content-Type":              "application/json",
		webhook.HeaderDelivery:      msg.Payload.DeliveryID,
		webhook.HeaderEvent:         "ON_STARTED_ARTIFACT",
		webhook.HeaderSchemaVersion: "1",
	} {
		if v := r.header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}

	var body struct {
		SchemaVersion int    `json:"schema_version"`
		DeliveryID    string `json:"delivery_id"`
		Rule          struct {
			Org    string `json:"org"`
			Number int64  `json:"number"`
		} `json:"rule"`
		Event struct {
			Trigger     string `json:"trigger"`
			Environment struct {
				Name string `json:"name"`
			} `json:"environment"`
			Snapshot struct {
				Index int64 `json:"index"`
			} `json:"snapshot"`
			Artifact struct {
				Fingerprint string `json:"fingerprint"`
				Provenance  []struct {
					Flow      string `json:"flow"`
					GitCommit string `json:"git_commit"`
					BuildURL  string `json:"build_url"`
				} `json:"provenance"`
			} `json:"artifact"`
		} `json:"event"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	a := msg.Payload.Event.Artifact
	if body.SchemaVersion != 1 || body.DeliveryID != msg.Payload.DeliveryID || body.Rule.Org != "acme" ||
		body.Rule.Number != 7 || body.Event.Trigger != "ON_STARTED_ARTIFACT" ||
		body.Event.Environment.Name != plugintest.SampleEnvironment || body.Event.Snapshot.Index != 42 ||
		body.Event.Artifact.Fingerprint != a.Fingerprint || len(body.Event.Artifact.Provenance) != 1 ||
		body.Event.Artifact.Provenance[0].Flow != "backend-ci" ||
		body.Event.Artifact.Provenance[0].GitCommit != a.Provenance[0].GitCommit ||
		body.Event.Artifact.Provenance[0].BuildURL != a.Provenance[0].BuildURL {
		t.Fatalf("payload is missing fields:\n%s", r.body)
	}
}

func TestUnsignedWithoutSecret(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	defer srv.Close()
	if err := configured(t).Notify(context.Background(), plugintest.Sample(sdk.OnCompliantEnv, sdk.Target{Type: sdk.TargetWebhook, URL: srv.URL})); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h.Get(webhook.HeaderSignature) != "" {
		t.Fatalf("a target without secret got a signature %q", h.Get(webhook.HeaderSignature))
	}
}

// The guard refuses before any connection is made, so nothing is sent to the private addresses
// named here; the loopback receiver proves nothing got through.
func TestSSRFGuard(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	targets := []string{
		"http://127.0.0.1:" + port + "/hook",
		"http://10.0.0.7/hook",
		"http://169.254.169.254/latest/meta-data/iam/",
		"http://[::1]:" + port + "/hook",
		"http://localhost:" + port + "/hook", // a name that resolves to loopback
	}
	guarded := webhook.New() // allow_private is off by default
	for _, target := range targets {
		err := guarded.Notify(context.Background(), plugintest.Sample(sdk.OnStartedArtifact, sdk.Target{Type: sdk.TargetWebhook, URL: target}))
		f := sdk.Classify(err)
		if err == nil || f.Retryable || f.Reason != sdk.ReasonBlocked {
			t.Errorf("%s: err=%v reason=%q retryable=%v, want a permanent %q", target, err, f.Reason, f.Retryable, sdk.ReasonBlocked)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback receiver got %d requests through the guard", n)
	}

	allowed := configured(t)
	for _, target := range []string{targets[0], targets[4]} {
		if err := allowed.Notify(context.Background(), plugintest.Sample(sdk.OnStartedArtifact, sdk.Target{Type: sdk.TargetWebhook, URL: target})); err != nil {
			t.Errorf("allow_private: %s: %v", target, err)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("with allow_private the receiver got %d requests, want 2", n)
	}
}

func TestConfigureRejectsBadValues(t *testing.T) {
	for _, s := range []map[string]string{{"allow_private": "maybe"}, {"timeout": "soon"}, {"url": "x"}} {
		if err := webhook.New().Configure(context.Background(), s); err == nil {
			t.Errorf("Configure(%v) accepted", s)
		}
	}
}
