// Command example is a complete Veritrail notifier plugin: it opens an incident in a paging
// service that takes incidents as JSON over HTTP, one incident per delivery, deduplicated by the
// delivery ID. Copy this directory to start your own; README.md walks through building,
// pinning and configuring it.
//
// Settings (the operator's, in the plugin's catalog entry):
//
//	token          bearer token for the paging service (optional)
//	severity       default severity, "warning" unless set
//	allow_private  true to reach a service on loopback or a private network (default false)
//	timeout        bound on one attempt, default 10s
//
// Target fields: url is the paging service's incidents endpoint; params["severity"] overrides
// the severity for that target.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk"
	"github.com/veritrail/veritrail/plugins/sdk/safehttp"
)

func main() {
	sdk.Serve(newPager())
}

// pager is the notifier. Configure may run again after a restart, so it replaces its settings
// under a lock while deliveries read them.
type pager struct {
	mu       sync.RWMutex
	client   *http.Client
	token    string
	severity string
}

func newPager() *pager {
	return &pager{client: safehttp.NewClient(safehttp.Options{Timeout: 10 * time.Second}), severity: "warning"}
}

func (p *pager) Configure(_ context.Context, settings map[string]string) error {
	s := sdk.Settings(settings)
	if err := s.Only("token", "severity", "allow_private", "timeout"); err != nil {
		return err
	}
	allowPrivate, err := s.Bool("allow_private", false)
	if err != nil {
		return err
	}
	timeout, err := s.Duration("timeout", 10*time.Second)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.client = safehttp.NewClient(safehttp.Options{AllowPrivate: allowPrivate, Timeout: timeout})
	p.token = s.String("token", "")
	p.severity = s.String("severity", "warning")
	return nil
}

// incident is what the paging service takes.
type incident struct {
	DedupKey string            `json:"dedup_key"`
	Summary  string            `json:"summary"`
	Severity string            `json:"severity"`
	Source   string            `json:"source"`
	Link     string            `json:"link,omitempty"`
	Details  map[string]string `json:"details"`
}

func (p *pager) Notify(ctx context.Context, msg *sdk.Notification) error {
	u, err := safehttp.ParseURL(msg.Target.URL)
	if err != nil {
		return sdk.Permanent(sdk.ReasonConfig, err) // retrying cannot fix a bad URL
	}
	p.mu.RLock()
	client, token, severity := p.client, p.token, p.severity
	p.mu.RUnlock()
	if s := msg.Target.Params["severity"]; s != "" {
		severity = s
	}

	summary := sdk.Summarize(msg.Payload)
	in := incident{
		DedupKey: msg.Payload.DeliveryID, // the same on every retry: the service drops duplicates
		Summary:  summary.Title,
		Severity: severity,
		Source:   msg.Payload.Event.Environment.Name,
		Link:     summary.URL,
		Details:  map[string]string{},
	}
	for _, f := range summary.Facts {
		in.Details[f.Label] = f.Value
	}
	body, err := json.Marshal(in)
	if err != nil {
		return sdk.Permanent(sdk.ReasonConfig, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return sdk.Permanent(sdk.ReasonConfig, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}

	resp, err := client.Do(req)
	if err != nil {
		return sdk.ClassifyRequestError(fmt.Errorf("open incident: %w", err)) // network: retryable
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}()
	// 2xx: delivered; 429 and 5xx: retryable, with the service's Retry-After; other: permanent.
	return sdk.CheckResponse(resp, time.Now())
}
