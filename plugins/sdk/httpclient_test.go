package sdk

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/veritrail/veritrail/plugins/sdk/safehttp"
)

func TestHTTPClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	h := NewHTTPClient()
	if _, err := h.Client().Get(srv.URL); !errors.As(err, new(*safehttp.BlockedError)) {
		t.Fatalf("loopback with the defaults: %v, want a BlockedError", err)
	}
	if err := h.Configure(Settings{"allow_private": "true", "timeout": "2s"}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.Client().Get(srv.URL)
	if err != nil {
		t.Fatalf("loopback with allow_private: %v", err)
	}
	resp.Body.Close()
	if h.Client().Timeout.String() != "2s" {
		t.Errorf("timeout %v, want 2s", h.Client().Timeout)
	}
	for _, bad := range []Settings{{"colour": "red"}, {"allow_private": "perhaps"}, {"timeout": "soon"}} {
		if err := h.Configure(bad); err == nil {
			t.Errorf("Configure(%v) accepted", bad)
		}
	}
}

// TestPostJSON: the headers given and the content type reach the receiver, and each outcome is classified.
func TestPostJSON(t *testing.T) {
	status := http.StatusNoContent
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(status)
	}))
	defer srv.Close()
	h := NewHTTPClient()
	if err := h.Configure(Settings{"allow_private": "true"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := h.PostJSON(ctx, srv.URL, []byte(`{}`), http.Header{"X-Test": {"1"}}); err != nil {
		t.Fatal(err)
	}
	if got.Get("X-Test") != "1" || got.Get("Content-Type") != "application/json" {
		t.Fatalf("headers received: %v", got)
	}
	var f *Failure
	status = http.StatusServiceUnavailable
	if err := h.PostJSON(ctx, srv.URL, []byte(`{}`), nil); !errors.As(err, &f) || !f.Retryable {
		t.Fatalf("503: %v", err)
	}
	if err := h.PostJSON(ctx, "ftp://example.com/x", []byte(`{}`), nil); !errors.As(err, &f) || f.Retryable || f.Reason != ReasonConfig {
		t.Fatalf("a URL that is not http(s): %v", err)
	}
}
