package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/internal/bus/kafkabus"
)

// startDistributed starts the distributed mode in this process, as separate tiers would run:
// evaluate and two ingest processes (the second for the assert phases' writers) on an
// in-process Kafka (kfake, 4 partitions) and a fresh schema of the PostgreSQL at cfg.Postgres,
// dropped again by close. The notify tier is left out: the phases
// that use this send no notifications.
func startDistributed(ctx context.Context, cfg Config) (*product, error) {
	admin, err := sql.Open("pgx", cfg.Postgres)
	if err == nil {
		err = admin.PingContext(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: PostgreSQL at --postgres: %w", err)
	}
	schema := fmt.Sprintf("vt_bench_%d", time.Now().UnixNano())
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return nil, fmt.Errorf("bench: create schema: %w", err)
	}
	var closers []func() error
	closeAll := func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		_, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		return errors.Join(append(errs, err, admin.Close())...)
	}
	fail := func(err error) (*product, error) {
		_ = closeAll()
		return nil, err
	}
	u, err := url.Parse(cfg.Postgres)
	if err != nil {
		return fail(fmt.Errorf("bench: --postgres must be a URL: %w", err))
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(4))
	if err != nil {
		return fail(fmt.Errorf("bench: kfake: %w", err))
	}
	closers = append(closers, func() error { cluster.Close(); return nil })

	pr := &product{logs: newLogCounter(), secret: app.NewSecret()}
	acfg := app.Config{Addr: "127.0.0.1:0", Postgres: u.String(), BootstrapOrg: benchOrg, BootstrapToken: pr.secret,
		Log: pr.logs.logger(), Kafka: kafkabus.Config{Brokers: cluster.ListenAddrs(), Partitions: 4}}
	ev, err := app.StartEvaluate(ctx, acfg)
	if err != nil {
		return fail(fmt.Errorf("bench: start evaluate: %w", err))
	}
	closers = append(closers, ev.Close)
	if pr.r, err = app.StartIngest(ctx, acfg); err != nil {
		return fail(fmt.Errorf("bench: start ingest: %w", err))
	}
	closers = append(closers, pr.r.Close)
	pr.base = "http://" + pr.r.Addr
	// A second ingest process for the writers of the assert phases: readers at the first must
	// see what the second acknowledged.
	writer, err := app.StartIngest(ctx, acfg)
	if err != nil {
		return fail(fmt.Errorf("bench: start the second ingest: %w", err))
	}
	closers = append(closers, writer.Close)
	pr.writerBase = "http://" + writer.Addr
	pr.client = newClient(cfg.Concurrency)
	pr.closeFn = closeAll
	return pr, nil
}
