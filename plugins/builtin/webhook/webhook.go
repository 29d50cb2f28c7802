// Package webhook is the built-in notifier for WEBHOOK targets: it POSTs the payload as JSON
// (schema version in the body and a header) to the target's URL, signed with HMAC-SHA256 when
// the target has a secret, through the SSRF-guarded client of plugins/sdk/safehttp.
//
// # Request
//
//	POST <target url>
//	Content-Type: application/json
//	User-Agent: Veritrail-Webhook/1
//	X-Veritrail-Delivery: <payload.delivery_id, the same on every retry>
//	X-Veritrail-Event: <trigger>
//	X-Veritrail-Schema-Version: 1
//	X-Veritrail-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// The timestamp is signed with the body so a receiver can refuse replays older than its
// tolerance (Verify does both checks).
//
// # Settings
//
//	allow_private  true lets targets resolve to loopback, private and link-local addresses
//	               (tests, on-premises receivers); default false
//	timeout        bound on one attempt, default 10s
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk"
)

// Headers of a webhook request.
const (
	HeaderSignature     = "X-Veritrail-Signature"
	HeaderDelivery      = "X-Veritrail-Delivery"
	HeaderEvent         = "X-Veritrail-Event"
	HeaderSchemaVersion = "X-Veritrail-Schema-Version"
)

// Notifier delivers to WEBHOOK targets. The zero value is not usable; call New.
type Notifier struct {
	http *sdk.HTTPClient
}

var _ sdk.Notifier = (*Notifier)(nil)

// New returns a webhook notifier with the default settings (private addresses refused).
func New() *Notifier {
	return &Notifier{http: sdk.NewHTTPClient()}
}

// Configure applies the settings described in the package comment.
func (n *Notifier) Configure(_ context.Context, settings map[string]string) error {
	if err := n.http.Configure(settings); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}

// Notify makes one POST of the payload to the target.
func (n *Notifier) Notify(ctx context.Context, msg *sdk.Notification) error {
	body, err := json.Marshal(msg.Payload)
	if err != nil {
		return sdk.Permanent(sdk.ReasonConfig, fmt.Errorf("webhook: encode payload: %w", err))
	}
	header := http.Header{}
	header.Set("User-Agent", "Veritrail-Webhook/1")
	header.Set(HeaderDelivery, msg.Payload.DeliveryID)
	header.Set(HeaderEvent, string(msg.Payload.Event.Trigger))
	header.Set(HeaderSchemaVersion, strconv.Itoa(msg.Payload.SchemaVersion))
	if msg.Target.Secret != "" {
		header.Set(HeaderSignature, Sign([]byte(msg.Target.Secret), time.Now().Unix(), body))
	}
	if err := n.http.PostJSON(ctx, msg.Target.URL, body, header); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}

// Sign returns the signature header value for body sent at unix time t.
func Sign(secret []byte, t int64, body []byte) string {
	ts := strconv.FormatInt(t, 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a signature header against body for a receiver: the HMAC must match and the
// signed time must be within tolerance of now.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("signature header has no timestamp")
	}
	if d := now.Sub(time.Unix(t, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("signature timestamp is %s away from now, beyond the tolerance of %s", d.Round(time.Second), tolerance)
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return errors.New("no signature matches the body")
}
