// Command veritrail runs the Veritrail supply-chain compliance service: `serve` runs every
// tier in one process; `ingest`, `evaluate` and `notify` run one tier each; `admin` manages
// organizations, users and keys; `policy` has the tools of policy authors. Settings come from
// defaults, a YAML file (--config), VERITRAIL_* variables and flags (package config).
package main

//go:generate sh -c "go run . config docs > ../../docs/CONFIGURATION.md"

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "veritrail:", err)
		os.Exit(1)
	}
}
