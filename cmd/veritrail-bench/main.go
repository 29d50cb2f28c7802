// Command veritrail-bench runs Veritrail's measurements, outside the product binary. `bench`
// measures ingest and evaluator throughput against a bare Huma baseline, in-process (package
// bench, with the in-process kfake broker for the distributed phases). `faults` runs the fault
// harness (internal/faults): the distributed or embedded mode as real processes under a load
// of concurrent writers while processes are killed -9 and restarted, then checks that nothing
// acknowledged was lost or duplicated and every trail's compliance is right, and prints a JSON
// report.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/veritrail/veritrail/cmd/veritrail-bench/faults"
)

const usage = `Usage: veritrail-bench <command> [flags]

Commands:
  bench    measure ingest and evaluator throughput against a bare Huma baseline, in-process
  faults   run the distributed or embedded mode as processes under load and faults, verify, report (JSON)
  fill     add attestations over trails, and environments with snapshots, to a store (no HTTP)
  scale    fill a store to each of several sizes and time the reads that must not slow down as it grows

Run 'veritrail-bench <command> -h' for its flags.
`

func main() {
	// The harness re-executes this binary for each process it runs (broker, ingest, ...).
	if faults.IsChild() {
		os.Exit(faults.RunChild())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "veritrail-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "bench":
		return helpIsNoError(runBench(ctx, args[1:], stdout, stderr))
	case "faults":
		return helpIsNoError(runFaults(ctx, args[1:], stdout, stderr))
	case "fill":
		return helpIsNoError(runFill(ctx, args[1:], stderr))
	case "scale":
		return helpIsNoError(runScale(ctx, args[1:], stdout, stderr))
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// helpIsNoError makes -h and --help, which print a command's flags, succeed.
func helpIsNoError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// errProblems is returned when the run found problems, after its report was printed.
var errProblems = errors.New("faults: the run found problems (see the report)")

func runFaults(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("faults", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg faults.Config
	mode := fs.String("mode", "distributed", "distributed (broker, ingest, evaluators on PostgreSQL) or embedded (serve)")
	fs.DurationVar(&cfg.Duration, "duration", time.Minute, "how long the load runs at least; the faults repeat until then")
	fs.IntVar(&cfg.Writers, "writers", 64, "concurrent writers")
	fs.Float64Var(&cfg.Rate, "rate", 0, "requests a second of all writers together; 0 sends as fast as answered")
	fs.IntVar(&cfg.Keys, "keys", 0, "API keys the writers use (writer i uses key i mod keys); 0: one per writer")
	fs.IntVar(&cfg.Ahead, "ahead", 4, "trails each writer begins before it attests them; -1: attest each right after its begin")
	fs.StringVar(&cfg.Postgres, "postgres", os.Getenv("VERITRAIL_POSTGRES"),
		"postgres:// URL of a database to create the run's schema in (distributed; env VERITRAIL_POSTGRES)")
	fs.DurationVar(&cfg.FaultEvery, "fault-every", 20*time.Second, "mean time between faults (each one 0.5 to 1.5 times this, at random)")
	fs.IntVar(&cfg.Step, "step", 200, "201s the writes must get after each fault (and between faults, 0.5 to 1.5 times this)")
	fs.DurationVar(&cfg.StepTimeout, "step-timeout", 30*time.Second, "bound on the writes' recovery after a fault")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 5*time.Minute, "bound on the evaluators' drain after the load")
	fs.IntVar(&cfg.Evaluators, "evaluators", 2, "evaluate processes (distributed)")
	partitions := fs.Int("partitions", 12, "partitions of the Kafka topics (distributed)")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the writers' plans and the faults' moments; 0 picks one")
	dir := fs.String("work-dir", "", "where the processes' logs and data go (default: a new temporary directory, kept)")
	text := fs.Bool("text", false, "print the report as text instead of JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("faults: unexpected arguments %v", fs.Args())
	}
	cfg.Mode = faults.Mode(*mode)
	cfg.Partitions = int32(*partitions)
	if cfg.Mode != faults.Distributed && cfg.Mode != faults.Embedded {
		return fmt.Errorf("faults: --mode must be distributed or embedded, got %q", *mode)
	}
	if cfg.Mode == faults.Distributed && cfg.Postgres == "" {
		return errors.New("faults: the distributed mode needs --postgres URL (or VERITRAIL_POSTGRES)")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	cfg.Launch = faults.SelfLauncher(exe)
	cfg.Dir = *dir
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "veritrail-faults-"); err != nil {
			return fmt.Errorf("faults: %w", err)
		}
	} else if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	cfg.Progress = stderr
	rep, err := faults.Run(ctx, cfg)
	if rep != nil {
		if *text {
			err = errors.Join(err, rep.WriteText(stdout))
		} else {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			err = errors.Join(err, enc.Encode(rep))
		}
		if !rep.Passed {
			err = errors.Join(err, errProblems)
		}
	}
	return err
}
