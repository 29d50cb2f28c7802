package main

import (
	"context"
	"flag"
	"io"
	"testing"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
)

// TestAllowPrivateFlag: --notify-allow-private reaches every process that needs it: notify, which
// delivers, ingest, which checks targets when rules are written, and serve, which does both.
func TestAllowPrivateFlag(t *testing.T) {
	for _, tier := range []string{"serve", "ingest", "notify"} {
		fs := flag.NewFlagSet(tier, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var cfg app.Config
		registerFlags(fs, &cfg, tier)
		if err := fs.Parse([]string{"--notify-allow-private"}); err != nil {
			t.Fatalf("%s: %v", tier, err)
		}
		if !cfg.Notify.Notifiers.AllowPrivate {
			t.Errorf("%s: --notify-allow-private did not set the notify section", tier)
		}
	}
}

// TestCommandsParseTheirFlags: every command's flag set builds (a flag defined twice panics) and
// -h prints its usage.
func TestCommandsParseTheirFlags(t *testing.T) {
	for _, cmd := range [][]string{{"serve", "-h"}, {"ingest", "-h"}, {"evaluate", "-h"}, {"notify", "-h"}} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%v: panicked: %v", cmd, p)
				}
			}()
			_ = run(context.Background(), cmd)
		}()
	}
}
