package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/veritrail/veritrail/cmd/veritrail-bench/bench"
)

// runBench measures the baseline and the product in one run and prints the result; progress
// goes to stderr so that --json output can be piped. --snapshots measures environment
// snapshot reports instead of attestations; --assert the assert endpoint; --notify the time from a
// snapshot report's 201 to the webhook that its trigger reaches.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.Config
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "measured duration of each phase")
	fs.IntVar(&cfg.Concurrency, "concurrency", 16, "concurrent clients")
	fs.IntVar(&cfg.Trails, "trails", 1000, "trails the attestations are spread over")
	fs.IntVar(&cfg.PayloadBytes, "payload-bytes", 1024, "size of each multipart attestation body")
	snapshots := fs.Bool("snapshots", false, "measure K8S snapshot reports (baseline, ingest, evaluator) instead of attestations")
	asserts := fs.Bool("assert", false, "measure assert (environment, flow and policy scope) against a bare Huma GET instead of attestations")
	fs.StringVar(&cfg.Postgres, "postgres", "", "with --assert: measure the distributed mode on kfake and a fresh schema of this PostgreSQL URL; with --apart: also the distributed evaluator alone (1 and 2 evaluate tiers) against the embedded one, and the whole distributed pipeline at full rate (1 and 2 evaluate tiers)")
	fs.IntVar(&cfg.AssertLoadRate, "assert-load-rate", 500, "with --assert: attestations a second sent by the writers of the phase under ingest load")
	fs.IntVar(&cfg.SnapshotArtifacts, "snapshot-artifacts", 200, "pods in each snapshot report (--snapshots)")
	fs.BoolVar(&cfg.SnapshotRepeat, "snapshot-repeat", false, "every report repeats the last running set instead of alternating between two (--snapshots)")
	notifyRun := fs.Bool("notify", false, "measure the time from a snapshot report's 201 to its webhook (p50, p99) beside the report's own time")
	fs.IntVar(&cfg.NotifyReports, "notify-reports", 200, "measured reports, sent one at a time (--notify)")
	observe := fs.Bool("observability", false, "measure what metrics and tracing (sampling everything, spans discarded) cost ingest alone: off, metrics, metrics+tracing, alternating for --rounds rounds")
	fs.IntVar(&cfg.Rounds, "rounds", 3, "with --observability: the rounds of the three settings")
	asJSON := fs.Bool("json", false, "print the result as JSON instead of a table")
	fs.BoolVar(&cfg.Apart, "apart", false, "also measure each tier alone: ingest with no evaluator, then the evaluator alone on that backlog")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured ingest phase and its drain (with --assert: of the environment-scope phase) to this file")
	execTrace := fs.String("trace", "", "write an execution trace (go tool trace) of the phase --cpuprofile would cover to this file")
	fs.StringVar(&cfg.ProfilePhase, "profile-phase", "", "the phase --cpuprofile covers: with --apart combined (default), ingest-alone or evaluator-alone; with --assert assert-mixed, writes-full or writes-half (the writers alone, back to back and at half that rate; the environment-scope phase otherwise)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments %v", fs.Args())
	}
	cfg.Progress = stderr
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer f.Close()
		cfg.CPUProfile = f
	}
	if *execTrace != "" {
		f, err := os.Create(*execTrace)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer f.Close()
		cfg.ExecTrace = f
	}
	var res interface{ WriteTable(io.Writer) error }
	var err error
	switch {
	case *observe:
		res, err = bench.RunObserve(ctx, cfg)
	case *notifyRun:
		res, err = bench.RunNotify(ctx, cfg)
	case *asserts:
		res, err = bench.RunAssert(ctx, cfg)
	case *snapshots:
		res, err = bench.RunSnapshots(ctx, cfg)
	default:
		res, err = bench.Run(ctx, cfg)
	}
	if err != nil {
		return err
	}
	return writeResult(stdout, res, *asJSON)
}

// writeResult prints a run's result as a table, or as indented JSON.
func writeResult(w io.Writer, res interface{ WriteTable(io.Writer) error }, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return res.WriteTable(w)
}
