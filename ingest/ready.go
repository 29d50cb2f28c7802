package ingest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/veritrail/veritrail/internal/health"
)

// Pinger is a dependency that can tell whether it works now (health.Pinger).
type Pinger = health.Pinger

// ReadyCheck is a dependency /ready answers for, by name ("store", "bus").
type ReadyCheck = health.Check

// Readiness is the checker behind /ready, for the composition root's /readyz on the same port
// (one round of pings serves both).
func (a *API) Readiness() *health.Checker { return a.ready }

// serveReady answers 200 OK while every dependency works, else 503 naming those that do not,
// with Retry-After; plain text either way, as the client contract has it (/readyz is the
// operator's JSON answer).
func (a *API) serveReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if failing := a.ready.Failing(r.Context()); len(failing) > 0 {
		names := make([]string, len(failing))
		for i, f := range failing {
			names[i] = f.Check
		}
		w.Header().Set("Retry-After", strconv.Itoa(retryUnavailable))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "Not ready: %s unavailable", strings.Join(names, ", "))
		return
	}
	_, _ = w.Write([]byte("OK"))
}

// serveLive answers 200 while the process serves HTTP at all: an orchestrator restarts a
// process that fails it, and only stops sending traffic to one that fails /ready.
func serveLive(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("OK"))
}
