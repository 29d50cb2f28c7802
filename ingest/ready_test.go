package ingest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type pingFunc func(ctx context.Context) error

func (f pingFunc) Ping(ctx context.Context) error { return f(ctx) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestReadyAnswers: /ready is 200 OK while every dependency answers its ping, and 503 naming
// those that do not, with Retry-After, until they answer again; /live is 200 throughout.
func TestReadyAnswers(t *testing.T) {
	var busDown atomic.Bool
	checks := []ReadyCheck{
		{"store", pingFunc(func(context.Context) error { return nil })},
		{"bus", pingFunc(func(context.Context) error {
			if busDown.Load() {
				return errors.New("no broker answers")
			}
			return nil
		})},
	}
	a := &API{ready: newReadiness(checks, time.Nanosecond, time.Second, quiet())}
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

// TestReadyPingsOncePerInterval: probes within the interval reuse the last answer, and
// concurrent probes share one round of pings.
func TestReadyPingsOncePerInterval(t *testing.T) {
	var pings atomic.Int64
	release := make(chan struct{})
	r := newReadiness([]ReadyCheck{{"store", pingFunc(func(context.Context) error {
		pings.Add(1)
		<-release
		return nil
	})}}, time.Hour, time.Minute, quiet())
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if f := r.failingChecks(context.Background()); len(f) != 0 {
				t.Errorf("failing %v", f)
			}
		})
	}
	for !r.waiting() {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	r.failingChecks(context.Background())
	if n := pings.Load(); n != 1 {
		t.Fatalf("%d pings for 51 probes within the interval, want 1", n)
	}
}

// waiting reports whether a round of pings is under way.
func (r *readiness) waiting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.round != nil
}

// TestReadyHungDependency: a ping that does not answer counts as failed once the timeout
// passed, and is not started again while it hangs; once it returns, the next probe pings anew.
func TestReadyHungDependency(t *testing.T) {
	var pings atomic.Int64
	release := make(chan struct{})
	r := newReadiness([]ReadyCheck{
		{"store", pingFunc(func(context.Context) error { return nil })},
		{"bus", pingFunc(func(context.Context) error {
			if pings.Add(1) == 1 {
				<-release // ignores its context, as a SQLite busy wait does
			}
			return nil
		})},
	}, time.Nanosecond, 50*time.Millisecond, quiet())
	for range 3 {
		if f := r.failingChecks(context.Background()); !slices.Equal(f, []string{"bus"}) {
			t.Fatalf("failing %v while the bus's ping hangs, want [bus]", f)
		}
	}
	if n := pings.Load(); n != 1 {
		t.Fatalf("%d pings of a hung dependency, want 1", n)
	}
	close(release)
	for {
		f := r.failingChecks(context.Background())
		if len(f) == 0 {
			break
		}
		time.Sleep(time.Millisecond) // until the hung ping has returned
	}
	if n := pings.Load(); n != 2 {
		t.Fatalf("%d pings, want 2: the hung one and one after it returned", n)
	}
}
