package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the result for people.
func (r *Result) WriteTable(w io.Writer) error {
	m, s := r.Machine, r.Settings
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d), %s %s/%s\n", m.NumCPU, m.GOMAXPROCS, m.GoVersion, m.OS, m.Arch)
	fmt.Fprintf(w, "load:    %d clients, %s per phase after %s of warm-up, %d trails, %d-byte multipart bodies\n",
		s.Concurrency, s.Duration, s.Warmup, s.Trails, s.BodyBytes)
	fmt.Fprintf(w, "gc:      %s\n\n", s.ProductGC)

	const row = "%-31s %8s %8s %8s %8s %8s %8s %7s %10s %6s\n"
	fmt.Fprintf(w, row, "phase", "ok/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "ok", "errors", "cpu us/ok", "cores")
	for _, p := range []struct {
		name string
		Phase
	}{{"bare Huma multipart (baseline)", r.Bare}, {"ingest attestations, 201", r.Ingest}} {
		fmt.Fprintf(w, row, p.name, fmt.Sprintf("%.0f", p.PerSecond), fmt.Sprintf("%.2f", p.P50ms), fmt.Sprintf("%.2f", p.P90ms),
			fmt.Sprintf("%.2f", p.P99ms), fmt.Sprintf("%.2f", p.MaxMs), fmt.Sprint(p.OK), fmt.Sprint(p.Errors),
			fmt.Sprintf("%.0f", p.CPUPerOK), fmt.Sprintf("%.2f", p.Cores))
	}
	for _, p := range []struct {
		name string
		Phase
	}{{"baseline", r.Bare}, {"ingest", r.Ingest}} {
		if p.FirstErr != "" {
			fmt.Fprintf(w, "first %s error: %s\n", p.name, p.FirstErr)
		}
	}

	ev := r.Evaluator
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ingest / bare\t%.2f (target >= %.2f: %s)\n", r.Ratio, r.RatioTarget, verdict(r.RatioMet))
	fmt.Fprintf(tw, "evaluator apply rate\t%.0f/s during the load (%.2fx ingest)", ev.ApplyPerSecond, ev.VsIngest)
	if ev.DrainPerSecond > 0 {
		fmt.Fprintf(tw, ", %.0f/s alone after it", ev.DrainPerSecond)
	}
	fmt.Fprintf(tw, ", %.0f/s overall\n", ev.OverallPerSecond)
	fmt.Fprintf(tw, "backlog\t%d at the stop (max %d) of %d accepted\n", ev.BacklogAtStop, ev.MaxBacklog, ev.Accepted)
	if ev.Drained {
		fmt.Fprintf(tw, "drain\tall applied %.1f s after the load stopped, every trail evaluated after %.1f s\n",
			ev.DrainSeconds, ev.EvaluatedSeconds)
	} else {
		fmt.Fprintf(tw, "drain\tNOT caught up %.1f s after the load stopped\n", ev.DrainSeconds)
	}
	kept := "yes"
	if !ev.KeptUp {
		kept = "NO"
	}
	fmt.Fprintf(tw, "evaluator kept up\t%s (needs >= %.2fx the ingest rate during the load and a complete drain)\n", kept, keptUpShare)
	if m := r.Resident; m.RSSMB > 0 {
		fmt.Fprintf(tw, "resident set, ingest phase\t%.0f MB at its end, peak %.0f MB (product, evaluator and load generator in one process; target < %d MB: %s)\n",
			m.RSSMB, m.HWMMB, ResidentTargetMB, verdict(m.HWMMB < ResidentTargetMB))
	}
	if a := r.Apart; a != nil {
		fmt.Fprintf(tw, "ingest alone\t%.0f/s, p50 %.2f ms, p99 %.2f ms: %.2fx bare (target >= %.2f: %s)\n",
			a.Ingest.PerSecond, a.Ingest.P50ms, a.Ingest.P99ms, a.Ratio, r.RatioTarget, verdict(a.Ratio >= r.RatioTarget))
		fmt.Fprintf(tw, "\t%.0f us of CPU per request (bare %.0f), %.2f cores busy (bare %.2f), %.1f publishes per bus write\n",
			a.Ingest.CPUPerOK, r.Bare.CPUPerOK, a.Ingest.Cores, r.Bare.Cores, a.PublishesPerCommit)
		fmt.Fprintf(tw, "evaluator alone\t%.0f/s (%d in %.1f s after %d while starting): %.2fx ingest alone (keeps up: %s)\n",
			a.EvaluatorPerSecond, a.Backlog-a.AppliedAtStart, a.EvaluatorSeconds, a.AppliedAtStart, a.VsIngest, verdict(a.VsIngest >= 1))
		fmt.Fprintf(tw, "\tCPU per attestation %.0f us (SQLite: evaluator and store in this process)\n", a.EvaluatorCPUPerApplied)
	}
	if d := r.Distributed; d != nil {
		for _, run := range d.Runs {
			fmt.Fprintf(tw, "distributed, %d evaluator(s)	%.0f/s (%d in %.1f s after %d while joining; ingest alone %.0f/s), CPU per attestation %.0f us here + %.0f us PostgreSQL, deadlocks logged %d (database %d)\n",
				run.Evaluators, run.PerSecond, run.Backlog-run.AppliedAtStart, run.Seconds, run.AppliedAtStart, run.Ingest.PerSecond, run.CPUPerApplied, run.PGCPUPerApplied,
				run.Deadlocks, run.DatabaseDeadlocks)
			if a := r.Apart; a != nil && a.EvaluatorCPUPerApplied > 0 {
				pg := (run.CPUPerApplied + run.PGCPUPerApplied) / a.EvaluatorCPUPerApplied
				fmt.Fprintf(tw, "\tCPU per attestation %.2fx the SQLite path's (target <= 2: %s)\n", pg, verdict(pg <= 2))
			}
		}
		for _, run := range d.Together {
			ev := run.Evaluator
			fmt.Fprintf(tw, "distributed whole, %d evaluator(s)	%.0f/s accepted (p50 %.2f ms, p99 %.2f ms), applied %.0f/s during the load, largest backlog %d, %d at the stop, drained in %.1f s (kept up: %s), deadlocks logged %d (database %d)\n",
				run.Evaluators, run.Ingest.PerSecond, run.Ingest.P50ms, run.Ingest.P99ms, ev.ApplyPerSecond, ev.MaxBacklog, ev.BacklogAtStop,
				ev.DrainSeconds, verdict(ev.KeptUp), run.Deadlocks, run.DatabaseDeadlocks)
			if run.Ingest.CPUPerOK > 0 {
				fmt.Fprintf(tw, "\tCPU a 201: %.0f us in this process (ingest, evaluators, broker, load generator; %.2f cores), %.0f us PostgreSQL (%.2f cores); %.2f database commits a 201\n",
					run.Ingest.CPUPerOK, run.Ingest.Cores, run.PGCPUPerOK, run.PGCores, run.CommitsPerOK)
			}
		}
		fmt.Fprintf(tw, "distributed / embedded evaluator	%.2fx (target >= %.2f: %s)\n", d.VsEmbedded, DistributedTarget,
			verdict(d.VsEmbedded >= DistributedTarget))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeProductLog(w, r.ProductLog)
	return nil
}

func writeProductLog(w io.Writer, logs []LogCount) {
	if len(logs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nproduct log during the measured ingest phase:")
	for _, l := range logs {
		fmt.Fprintf(w, "  %6d x %s %s", l.Count, l.Level, l.Message)
		if l.Example != "" {
			fmt.Fprintf(w, " (first: %s)", l.Example)
		}
		fmt.Fprintln(w)
	}
}

// WriteTable prints the snapshot result for people.
func (r *SnapshotResult) WriteTable(w io.Writer) error {
	m, s := r.Machine, r.Settings
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d), %s %s/%s\n", m.NumCPU, m.GOMAXPROCS, m.GoVersion, m.OS, m.Arch)
	fmt.Fprintf(w, "load:    %d clients, each reporting to its own K8S environment, %s per phase after %s of warm-up\n",
		s.Concurrency, s.Duration, s.Warmup)
	fmt.Fprintf(w, "gc:      %s\n", s.ProductGC)
	how := "alternating between two running sets (one deployment rolled): every report creates a snapshot"
	if s.Mode == modeRepeat {
		how = "repeating the last running set: no report creates a snapshot"
	}
	fmt.Fprintf(w, "reports: %d pods (%d running artifacts), %d-byte JSON bodies, %s\n\n", s.ReportItems, s.RunningArtifacts, s.BodyBytes, how)

	const row = "%-31s %8s %8s %8s %8s %8s %8s %7s\n"
	fmt.Fprintf(w, row, "phase", "ok/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "ok", "errors")
	for _, p := range []struct {
		name string
		Phase
	}{{"bare Huma JSON PUT (baseline)", r.Bare}, {"ingest snapshot reports, 201", r.Ingest}} {
		fmt.Fprintf(w, row, p.name, fmt.Sprintf("%.0f", p.PerSecond), fmt.Sprintf("%.2f", p.P50ms), fmt.Sprintf("%.2f", p.P90ms),
			fmt.Sprintf("%.2f", p.P99ms), fmt.Sprintf("%.2f", p.MaxMs), fmt.Sprint(p.OK), fmt.Sprint(p.Errors))
	}
	for _, p := range []struct {
		name string
		Phase
	}{{"baseline", r.Bare}, {"ingest", r.Ingest}} {
		if p.FirstErr != "" {
			fmt.Fprintf(w, "first %s error: %s\n", p.name, p.FirstErr)
		}
	}

	ev := r.Evaluator
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ingest / bare\t%.2f\n", r.Ratio)
	fmt.Fprintf(tw, "evaluator apply rate\t%.0f reports/s during the load (%.2fx ingest)", ev.ApplyPerSecond, ev.VsIngest)
	if ev.DrainPerSecond > 0 {
		fmt.Fprintf(tw, ", %.0f/s alone after it (%.1f ms a report)", ev.DrainPerSecond, 1000/ev.DrainPerSecond)
	}
	fmt.Fprintf(tw, ", %.0f/s overall\n", ev.OverallPerSecond)
	fmt.Fprintf(tw, "backlog\t%d at the stop (max %d) of %d accepted\n", ev.BacklogAtStop, ev.MaxBacklog, ev.Accepted)
	if ev.Drained {
		fmt.Fprintf(tw, "drain\tall applied %.1f s after the load stopped\n", ev.DrainSeconds)
	} else {
		fmt.Fprintf(tw, "drain\tNOT caught up %.1f s after the load stopped\n", ev.DrainSeconds)
	}
	fmt.Fprintf(tw, "visible after the 201\tp50 %.0f ms, p99 %.0f ms, max %.0f ms (store polled every %v)\n",
		r.VisibleP50ms, r.VisibleP99ms, r.VisibleMaxms, pollEvery)
	kept := "yes"
	if !ev.KeptUp {
		kept = "NO"
	}
	fmt.Fprintf(tw, "evaluator kept up\t%s (needs >= %.2fx the ingest rate during the load and a complete drain)\n", kept, keptUpShare)
	if err := tw.Flush(); err != nil {
		return err
	}
	writeProductLog(w, r.ProductLog)
	return nil
}
