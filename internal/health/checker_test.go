package health

import (
	"context"
	"encoding/json"
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

type pingFunc = PingFunc

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestReadyPingsOncePerInterval: probes within the interval reuse the last answer, and
// concurrent probes share one round of pings.
func TestReadyPingsOncePerInterval(t *testing.T) {
	var pings atomic.Int64
	release := make(chan struct{})
	r := NewChecker([]Check{{"store", pingFunc(func(context.Context) error {
		pings.Add(1)
		<-release
		return nil
	})}}, time.Hour, time.Minute, quiet())
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if f := names(r.Failing(context.Background())); len(f) != 0 {
				t.Errorf("failing %v", f)
			}
		})
	}
	for !r.waiting() {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	names(r.Failing(context.Background()))
	if n := pings.Load(); n != 1 {
		t.Fatalf("%d pings for 51 probes within the interval, want 1", n)
	}
}

func names(failing []Failure) []string {
	var n []string
	for _, f := range failing {
		n = append(n, f.Check)
	}
	return n
}

// waiting reports whether a round of pings is under way.
func (r *Checker) waiting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.round != nil
}

// TestReadyHungDependency: a ping that does not answer counts as failed once the timeout
// passed, and is not started again while it hangs; once it returns, the next probe pings anew.
func TestReadyHungDependency(t *testing.T) {
	var pings atomic.Int64
	release := make(chan struct{})
	r := NewChecker([]Check{
		{"store", pingFunc(func(context.Context) error { return nil })},
		{"bus", pingFunc(func(context.Context) error {
			if pings.Add(1) == 1 {
				<-release // ignores its context, as a SQLite busy wait does
			}
			return nil
		})},
	}, time.Nanosecond, 50*time.Millisecond, quiet())
	for range 3 {
		if f := names(r.Failing(context.Background())); !slices.Equal(f, []string{"bus"}) {
			t.Fatalf("failing %v while the bus's ping hangs, want [bus]", f)
		}
	}
	if n := pings.Load(); n != 1 {
		t.Fatalf("%d pings of a hung dependency, want 1", n)
	}
	close(release)
	for {
		f := names(r.Failing(context.Background()))
		if len(f) == 0 {
			break
		}
		time.Sleep(time.Millisecond) // until the hung ping has returned
	}
	if n := pings.Load(); n != 2 {
		t.Fatalf("%d pings, want 2: the hung one and one after it returned", n)
	}
}

// TestReadyzAnswers: /readyz is 200 {"status":"ready"} while every check passes, and 503 with
// Retry-After and each failing check with its reason (not its error, which is logged) otherwise; /livez is 200 throughout.
func TestReadyzAnswers(t *testing.T) {
	var down atomic.Bool
	c := NewChecker([]Check{{"store", pingFunc(func(context.Context) error { return nil })},
		{"migrations", pingFunc(func(context.Context) error {
			if down.Load() {
				return errors.New("schema at version 3, this binary needs 5")
			}
			return nil
		})}}, time.Nanosecond, time.Second, quiet())
	get := func(h http.HandlerFunc) (int, map[string]any, http.Header) {
		t.Helper()
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("body %q: %v", rec.Body, err)
		}
		return rec.Code, body, rec.Header()
	}
	if code, body, _ := get(c.ServeReadyz); code != http.StatusOK || body["status"] != "ready" || body["failing"] != nil {
		t.Fatalf("ready: %d %v", code, body)
	}
	down.Store(true)
	code, body, h := get(c.ServeReadyz)
	failing, _ := body["failing"].([]any)
	if code != http.StatusServiceUnavailable || body["status"] != "not ready" || len(failing) != 1 || h.Get("Retry-After") != "5" ||
		failing[0].(map[string]any)["check"] != "migrations" || failing[0].(map[string]any)["reason"] != ReasonFailed {
		t.Fatalf("not ready: %d %v %v", code, body, h)
	}
	if code, body, _ := get(ServeLivez); code != http.StatusOK || body["status"] != "alive" {
		t.Fatalf("livez: %d %v", code, body)
	}
}
