package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/pgtest"
)

// TestRunEndToEnd runs every phase for a moment, tiers apart included: the numbers mean nothing
// at this length, the test proves the phases work and the evaluator's progress is followed to
// the end.
func TestRunEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded product")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := Run(ctx, Config{Duration: 300 * time.Millisecond, Concurrency: 4, Trails: 4, PayloadBytes: 1024,
		DrainTimeout: 30 * time.Second, Progress: &progress, Apart: true})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	if res.Bare.OK == 0 || res.Bare.Errors != 0 {
		t.Errorf("baseline: %+v", res.Bare)
	}
	if res.Ingest.OK == 0 || res.Ingest.Errors != 0 {
		t.Errorf("ingest: %+v", res.Ingest)
	}
	ev := res.Evaluator
	if !ev.Drained || ev.Accepted != res.Ingest.OK || ev.AppliedDuringLoad > ev.Accepted || len(ev.Samples) == 0 {
		t.Errorf("evaluator: %+v", ev)
	}
	if last := ev.Samples[len(ev.Samples)-1]; last.Applied != ev.Accepted {
		t.Errorf("last sample %+v, want every accepted attestation applied (%d)", last, ev.Accepted)
	}
	// Tiers apart: ingest alone fills a backlog, and the evaluator alone is timed through all of
	// it once the product is up.
	if a := res.Apart; a == nil {
		t.Error("no tiers-apart result")
	} else {
		if a.Ingest.OK == 0 || a.Ingest.Errors != 0 || a.Backlog < a.Ingest.OK {
			t.Errorf("ingest alone %+v, backlog %d", a.Ingest, a.Backlog)
		}
		if a.AppliedAtStart < 0 || a.AppliedAtStart > a.Backlog || a.EvaluatorSeconds <= 0 || a.EvaluatorPerSecond <= 0 {
			t.Errorf("evaluator alone: %d at start of %d, %v s, %v/s", a.AppliedAtStart, a.Backlog, a.EvaluatorSeconds, a.EvaluatorPerSecond)
		}
		if _, ok := processCPU(); ok && a.Backlog > a.AppliedAtStart && a.EvaluatorCPUPerApplied <= 0 {
			t.Errorf("evaluator alone: %v us of CPU per attestation", a.EvaluatorCPUPerApplied)
		}
	}
	if res.Settings.BodyBytes != 1024 || res.Ratio <= 0 {
		t.Errorf("settings %+v, ratio %v", res.Settings, res.Ratio)
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bare Huma multipart", "ingest / bare", "evaluator kept up"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if _, err := json.Marshal(res); err != nil {
		t.Fatal(err)
	}
}

// TestRunDistributedApart runs the distributed evaluator-alone phase for a moment with one and two
// evaluate tiers: every accepted attestation is applied, and no deadlock is logged.
func TestRunDistributedApart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the distributed tiers")
	}
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	body, contentType, err := attestationBody(1024)
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	cfg := Config{Duration: 300 * time.Millisecond, Concurrency: 4, Trails: 4, DrainTimeout: time.Minute, Progress: &progress, Postgres: dsn}
	if err := cfg.defaults(); err != nil {
		t.Fatal(err)
	}
	d, err := runDistributedApart(ctx, cfg, body, contentType)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	if len(d.Runs) != 2 {
		t.Fatalf("runs %+v", d.Runs)
	}
	for i, r := range d.Runs {
		if r.Evaluators != i+1 || r.Ingest.OK == 0 || r.Ingest.Errors != 0 || r.Backlog < r.Ingest.OK ||
			r.AppliedAtStart <= 0 || r.AppliedAtStart > r.Backlog || r.Seconds <= 0 || r.Deadlocks != 0 {
			t.Errorf("run %d: %+v", i, r)
		}
	}
}

func TestAttestationBodySize(t *testing.T) {
	for _, size := range []int{1024, 4096} {
		body, ct, err := attestationBody(size)
		if err != nil {
			t.Fatal(err)
		}
		if len(body) != size {
			t.Errorf("body of %d bytes, want %d", len(body), size)
		}
		parts, err := parseMultipart(ct, body)
		if err != nil {
			t.Fatal(err)
		}
		var data map[string]any
		if err := json.Unmarshal(parts["data_json"], &data); err != nil || data["attestation_name"] != "smoke" {
			t.Errorf("data_json %s: %v", parts["data_json"], err)
		}
	}
	if body, _, _ := attestationBody(10); len(body) < 100 {
		t.Errorf("a tiny size still gives a whole attestation, got %d bytes", len(body))
	}
}

func TestPercentile(t *testing.T) {
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond} {
		if got := percentile(lat, q); got != want {
			t.Errorf("p%v = %v, want %v", q*100, got, want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("empty")
	}
}

// TestRunObserve: the observability phase measures each of its three settings once per round,
// with every request accepted, and relates each median to the one with everything off.
func TestRunObserve(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded product")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := RunObserve(ctx, Config{Duration: 200 * time.Millisecond, Concurrency: 4, Trails: 4, PayloadBytes: 1024,
		Progress: &progress, Rounds: 2})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	if len(res.Variants) != 3 || res.Variants[0].VsOff != 1 {
		t.Fatalf("variants %+v", res.Variants)
	}
	for _, v := range res.Variants {
		if len(v.Runs) != 2 || v.Median <= 0 || v.VsOff <= 0 {
			t.Errorf("%s: %+v", v.Name, v)
		}
		for _, p := range v.Runs {
			if p.OK == 0 || p.Errors != 0 {
				t.Errorf("%s: run %+v", v.Name, p)
			}
		}
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil || !bytes.Contains(table.Bytes(), []byte("metrics+tracing")) {
		t.Errorf("table %q: %v", table.String(), err)
	}
}
