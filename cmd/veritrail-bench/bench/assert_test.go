package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/pgtest"
)

// TestRunAssert runs the assert phases for a moment: the numbers mean nothing at this length; the test proves that
// every phase is answered without errors and the table reports the targets.
func TestRunAssert(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded product")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := RunAssert(ctx, Config{Duration: 200 * time.Millisecond, Concurrency: 2, Progress: &progress})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	for name, p := range map[string]Phase{"bare": res.Bare, "environment": res.Environment, "flow": res.Flow, "policy": res.Policy,
		"changing": res.Changing, "loaded": res.Loaded, "mixed": res.Mixed, "bare mixed": res.BareMixed.Readers} {
		if p.OK == 0 || p.Errors != 0 {
			t.Errorf("%s: %+v", name, p)
		}
	}
	if res.Changes == 0 || res.LoadWrites == 0 || res.MixedRate == 0 {
		t.Errorf("the changing phases accepted %d, %d and %.0f/s attestations", res.Changes, res.LoadWrites, res.MixedRate)
	}
	if res.IngestCapacity <= 0 || res.MixedRatio <= 0 || res.HalfRate <= 0 {
		t.Errorf("ingest capacity %.0f/s, at half %.0f/s, mixed ratio %.2f", res.IngestCapacity, res.HalfRate, res.MixedRatio)
	}
	if res.CapacityCPU <= 0 || res.HalfCPU <= 0 || res.AloneSched.Count == 0 || res.MixedSched.Count == 0 {
		t.Errorf("CPU an attestation %.0f / %.0f us, scheduler waits %+v / %+v", res.CapacityCPU, res.HalfCPU, res.AloneSched, res.MixedSched)
	}
	if b := res.BareMixed; b.WriteCapacity <= 0 || b.HalfRate <= 0 || b.HalfCores <= 0 || b.Ratio <= 0 {
		t.Errorf("the baselines' mixed phase: %+v", b)
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil || !strings.Contains(table.String(), "mixed: assert / bare GET") ||
		!strings.Contains(table.String(), "the same on the baselines") {
		t.Errorf("table: %v\n%s", err, table.String())
	}
}

// TestRunAssertDistributed runs the assert phases for a moment against ingest and evaluate on kfake and PostgreSQL.
func TestRunAssertDistributed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the distributed tiers")
	}
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := RunAssert(ctx, Config{Duration: 200 * time.Millisecond, Concurrency: 2, Progress: &progress, Postgres: dsn})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	if !strings.Contains(res.Settings.Mode, "distributed") {
		t.Errorf("mode %q", res.Settings.Mode)
	}
	for name, p := range map[string]Phase{"environment": res.Environment, "flow": res.Flow, "policy": res.Policy, "changing": res.Changing,
		"loaded": res.Loaded, "mixed": res.Mixed} {
		if p.OK == 0 || p.Errors != 0 {
			t.Errorf("%s: %+v", name, p)
		}
	}
}
