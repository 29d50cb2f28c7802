package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/ingest"
	"github.com/veritrail/veritrail/ingest/limits"
	"github.com/veritrail/veritrail/internal/bus/backlog"
)

const usage = `Usage: veritrail <command> [flags]

Commands:
  serve      run every tier in one process on a data directory (SQLite, embedded bus)
  ingest     run the HTTP ingest tier on Kafka and PostgreSQL
  evaluate   run the evaluate tier on Kafka and PostgreSQL
  notify     run the notify tier (deliver notifications) on Kafka and PostgreSQL
  admin      manage organizations, users and API keys
  policy     tools for policy authors: lint, compile, test and what-if environment policies
  bench      measure ingest and evaluator throughput against a bare Huma baseline, in-process

Run 'veritrail <command> -h' for the flags of a command. Every flag can also be set with an
environment variable: --data-dir is VERITRAIL_DATA_DIR, and so on.
`

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return runTier(ctx, "serve", args[1:], app.StartEmbedded)
	case "ingest":
		return runTier(ctx, "ingest", args[1:], app.StartIngest)
	case "evaluate":
		return runTier(ctx, "evaluate", args[1:], app.StartEvaluate)
	case "notify":
		return runTier(ctx, "notify", args[1:], app.StartNotify)
	case "admin":
		return runAdmin(ctx, args[1:])
	case "policy":
		return runPolicy(ctx, args[1:], os.Stdout, os.Stderr)
	case "bench":
		return runBench(ctx, args[1:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// env returns VERITRAIL_<NAME> for a flag name, or def.
func env(flagName, def string) string {
	if v, ok := os.LookupEnv("VERITRAIL_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))); ok {
		return v
	}
	return def
}

func envDuration(flagName string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(env(flagName, "")); err == nil {
		return d
	}
	return def
}

func envInt64(flagName string, def int64) int64 {
	if n, err := strconv.ParseInt(env(flagName, ""), 10, 64); err == nil {
		return n
	}
	return def
}

// registerFlags binds the configuration shared by the tiers.
func registerFlags(fs *flag.FlagSet, cfg *app.Config, tier string) {
	fs.StringVar(&cfg.Addr, "addr", env("addr", "127.0.0.1:8080"), "HTTP listen address")
	fs.StringVar(&cfg.Ingest.BaseURL, "base-url", env("base-url", ""), "public base URL for html_url links (default http://ADDR)")
	fs.DurationVar(&cfg.Ingest.ConsistencyWait, "consistency-wait", envDuration("consistency-wait", ingest.DefaultConsistencyWait),
		"how long a read waits for the writes of its organization acknowledged before it to be applied")
	cfg.Ingest.Limits = limits.Default()
	cfg.Ingest.Limits.RegisterFlags(fs)
	if tier == "serve" {
		fs.StringVar(&cfg.DataDir, "data-dir", env("data-dir", "./veritrail-data"), "directory for state, bus and attachments")
	} else {
		fs.StringVar(&cfg.Postgres, "postgres", env("postgres", ""), "PostgreSQL DSN, e.g. postgres://user@host:5432/veritrail")
		cfg.Kafka.RegisterFlags(fs, "")
	}
	switch tier {
	case "serve", "notify":
		registerNotifyFlags(fs, &cfg.Notify)
	case "ingest": // refuses rules whose targets notify would refuse
		registerAllowPrivateFlag(fs, &cfg.Notify)
		fs.Int64Var(&cfg.MaxBacklog, "max-backlog", envInt64("max-backlog", backlog.DefaultMax),
			"how many messages the evaluators may be behind all ingest processes before publishes wait (up to 1 s each)")
	}
	cfg.BootstrapOrg = env("bootstrap-org", "")
	cfg.BootstrapToken = env("bootstrap-token", "")
}

func runTier(ctx context.Context, tier string, args []string, start func(context.Context, app.Config) (*app.Running, error)) error {
	fs := flag.NewFlagSet(tier, flag.ContinueOnError)
	var cfg app.Config
	registerFlags(fs, &cfg, tier)
	level := fs.String("log-level", env("log-level", "info"), "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := cfg.Ingest.Limits.Validate(); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	if cfg.Ingest.BaseURL == "" {
		cfg.Ingest.BaseURL = "http://" + cfg.Addr
	}
	r, err := start(ctx, cfg)
	if err != nil {
		return err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- r.Wait() }()
	select {
	case <-ctx.Done():
	case err := <-stopped: // a tier failed and took the others down
		return errors.Join(err, r.Close())
	}
	return r.Close()
}
