// Command veritrail runs the Veritrail supply-chain compliance service: `serve` runs every
// tier in one process; `ingest`, `evaluate` and `notify` run one tier each; `admin` manages
// organizations, users and keys.
package main

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
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "veritrail:", err)
		os.Exit(1)
	}
}
