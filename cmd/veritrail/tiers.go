package main

import (
	"context"
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/cmd/veritrail/config"
	"github.com/veritrail/veritrail/internal/gctune"
	"github.com/veritrail/veritrail/internal/tracing"
)

// startFunc starts one of the process kinds of the composition root.
type startFunc func(context.Context, app.Config) (*app.Running, error)

// tierCommand is a command that runs tiers until it is interrupted or one of them fails.
func tierCommand(name, short string, start startFunc) *cobra.Command {
	cmd := &cobra.Command{Use: name, Short: short, Args: cobra.NoArgs}
	settings := config.Bind(cmd.Flags(), name)
	if envOnly := settings.EnvOnly(); envOnly != "" {
		cmd.Long = short + ".\n\nSettings without a flag (environment or config file only):\n" + envOnly
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		s, err := settings.Load(os.Environ())
		if err != nil {
			return err
		}
		log, err := s.Logger(cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		// The process's garbage collector: GOGC and GOMEMLIMIT, when set, win.
		if gc, _ := gctune.Apply(gctune.OS()); gc != (gctune.Applied{}) {
			log.Info("veritrail: garbage collector set", "gc_percent", gc.Percent, "memory_limit_bytes", gc.Limit)
		}
		cfg := s.App(log)
		if err := cfg.Ingest.Limits.Validate(); err != nil {
			return err
		}
		// Traces go where the OTEL_* variables say; none unless they name an exporter.
		tp, stopTracing, err := tracing.FromEnv(cmd.Context(), os.Getenv)
		if err != nil {
			return err
		}
		if tp != nil {
			cfg.Tracing = tp
		}
		return errors.Join(runTier(cmd.Context(), cfg, start), stopTracing(context.WithoutCancel(cmd.Context())))
	}
	return cmd
}

// runTier starts the process and runs it until ctx ends (SIGINT, SIGTERM) or a tier fails.
func runTier(ctx context.Context, cfg app.Config, start startFunc) error {
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
