package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veritrail/veritrail/internal/health"
	"github.com/veritrail/veritrail/internal/metrics"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// Operator routes beside the API (serve, ingest) or alone on the admin port (evaluate,
// notify).
const metricsPath = "/metrics"

// operator is what the operator routes answer from: the process's metrics and the readiness of
// its dependencies.
type operator struct {
	reg   *prometheus.Registry
	ready *health.Checker
}

// newOperator serves reg and makes the checker of /readyz over checks: the store
// answers, the bus is connected, and the store's migrations are applied (st.Migrated). Probes
// reuse a result for the ingest tier's ReadyCache and wait its ReadyTimeout for a ping.
func newOperator(cfg Config, reg *prometheus.Registry, st *sqlstore.Store, checks []health.Check, log *slog.Logger) operator {
	ic := cfg.ingestConfig()
	ic.Defaults()
	checks = append(checks, health.Check{Name: "migrations", Pinger: health.PingFunc(st.Migrated)})
	return operator{reg: reg, ready: health.NewChecker(checks, ic.ReadyCache, ic.ReadyTimeout, log)}
}

// routes answers /metrics, /livez and /readyz and passes every other request to next. It
// matches the paths exactly, in front of the API's router, so that the API's routing (and its
// 404s) stays as it was.
func (o operator) routes(next http.Handler) http.Handler {
	scrape := metrics.Handler(o.reg)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			switch r.URL.Path {
			case metricsPath:
				scrape.ServeHTTP(w, r)
				return
			case health.LivezPath:
				health.ServeLivez(w, r)
				return
			case health.ReadyzPath:
				o.ready.ServeReadyz(w, r)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// serveAdmin serves the operator routes alone on cfg.AdminAddr (evaluate, notify), when set.
func serveAdmin(ctx context.Context, r *Running, cfg Config, op operator, log *slog.Logger) error {
	if cfg.AdminAddr == "" {
		return nil
	}
	notFound := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "not found", http.StatusNotFound) })
	addr, err := listenAndServe(ctx, r, cfg.AdminAddr, op.routes(notFound), 0, "admin", log)
	if err != nil {
		return err
	}
	r.AdminAddr = addr
	return nil
}

// listenAndServe serves h on addr until ctx ends and returns the address actually listened on.
func listenAndServe(ctx context.Context, r *Running, addr string, h http.Handler, idle time.Duration, what string, log *slog.Logger) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen on %s (%s): %w", addr, what, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idle}
	r.group.Go(func() error {
		log.Info("veritrail: serving HTTP", "addr", ln.Addr().String(), "port", what)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	r.group.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return ln.Addr().String(), nil
}
