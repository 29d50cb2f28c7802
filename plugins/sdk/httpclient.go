package sdk

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk/safehttp"
)

// DefaultHTTPTimeout bounds one request of an HTTPClient unless the timeout setting says otherwise.
const DefaultHTTPTimeout = 10 * time.Second

// HTTPClient is the client of a notifier that posts to URLs its users configure: every
// connection goes through the safehttp guard, and Configure applies the settings
// allow_private (default false) and timeout (default 10s). Safe for concurrent use.
type HTTPClient struct {
	mu     sync.RWMutex
	client *http.Client
}

// NewHTTPClient returns a client with the default settings (private addresses refused).
func NewHTTPClient() *HTTPClient {
	return &HTTPClient{client: safehttp.NewClient(safehttp.Options{Timeout: DefaultHTTPTimeout})}
}

// Configure replaces the client with one built from settings, which may hold allow_private
// and timeout and nothing else.
func (h *HTTPClient) Configure(settings Settings) error {
	if err := settings.Only("allow_private", "timeout"); err != nil {
		return err
	}
	allowPrivate, err := settings.Bool("allow_private", false)
	if err != nil {
		return err
	}
	timeout, err := settings.Duration("timeout", DefaultHTTPTimeout)
	if err != nil {
		return err
	}
	c := safehttp.NewClient(safehttp.Options{AllowPrivate: allowPrivate, Timeout: timeout})
	h.mu.Lock()
	h.client = c
	h.mu.Unlock()
	return nil
}

// Client is the current client.
func (h *HTTPClient) Client() *http.Client {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.client
}

// PostJSON posts body, a JSON document, to rawURL with header (Content-Type is set) and
// classifies the outcome: a URL that does not parse is a permanent configuration failure, a
// transport error is what ClassifyRequestError says, an answer what CheckResponse says. Errors
// name the URL without its credentials.
func (h *HTTPClient) PostJSON(ctx context.Context, rawURL string, body []byte, header http.Header) error {
	u, err := safehttp.ParseURL(rawURL)
	if err != nil {
		return Permanent(ReasonConfig, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return Permanent(ReasonConfig, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.Client().Do(req)
	if err != nil {
		return ClassifyRequestError(fmt.Errorf("post to %s: %w", u.Redacted(), err))
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
		_ = resp.Body.Close()
	}()
	if err := CheckResponse(resp, time.Now()); err != nil {
		return fmt.Errorf("post to %s: %w", u.Redacted(), err)
	}
	return nil
}
