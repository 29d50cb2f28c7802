package ingest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/health"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestReadyAnswers: /ready is 200 OK while every dependency answers its ping, and 503 naming
// those that do not, with Retry-After, until they answer again; /live is 200 throughout.
func TestReadyAnswers(t *testing.T) {
	var busDown atomic.Bool
	checks := []ReadyCheck{
		{Name: "store", Pinger: health.PingFunc(func(context.Context) error { return nil })},
		{Name: "bus", Pinger: health.PingFunc(func(context.Context) error {
			if busDown.Load() {
				return errors.New("no broker answers")
			}
			return nil
		})},
	}
	a := &API{ready: health.NewChecker(checks, time.Nanosecond, time.Second, quiet())}
	get := func(h http.HandlerFunc, path string) (int, string, http.Header) {
		t.Helper()
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String(), rec.Header()
	}
	if code, body, _ := get(a.serveReady, "/ready"); code != http.StatusOK || body != "OK" {
		t.Fatalf("ready: %d %q, want 200 OK", code, body)
	}
	busDown.Store(true)
	code, body, h := get(a.serveReady, "/ready")
	if code != http.StatusServiceUnavailable || body != "Not ready: bus unavailable" || h.Get("Retry-After") != "5" ||
		h.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("bus down: %d %q, headers %v", code, body, h)
	}
	if code, body, _ := get(serveLive, "/live"); code != http.StatusOK || body != "OK" {
		t.Fatalf("live while not ready: %d %q", code, body)
	}
	busDown.Store(false)
	if code, body, _ := get(a.serveReady, "/ready"); code != http.StatusOK || body != "OK" {
		t.Fatalf("bus back: %d %q, want 200 OK", code, body)
	}
}
