package health

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Probe paths every tier answers (serve and ingest on their API port, evaluate and notify on
// their admin port).
const (
	LivezPath  = "/livez"
	ReadyzPath = "/readyz"
)

// RetryAfter is the Retry-After of a 503 from /readyz, in seconds.
const RetryAfter = 5

// readyz is the body of /readyz.
type readyz struct {
	Status  string    `json:"status"`
	Failing []Failure `json:"failing,omitempty"`
}

// ServeLivez answers 200 while the process serves HTTP at all: an orchestrator restarts a
// process that fails it, and only stops sending traffic to one that fails /readyz.
func ServeLivez(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, readyz{Status: "alive"})
}

// ServeReadyz answers 200 {"status":"ready"} while every check passes, else 503 with
// Retry-After and {"status":"not ready","failing":[{"check":...,"reason":...}]}.
func (r *Checker) ServeReadyz(w http.ResponseWriter, req *http.Request) {
	if failing := r.Failing(req.Context()); len(failing) > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
		writeJSON(w, http.StatusServiceUnavailable, readyz{Status: "not ready", Failing: failing})
		return
	}
	writeJSON(w, http.StatusOK, readyz{Status: "ready"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
