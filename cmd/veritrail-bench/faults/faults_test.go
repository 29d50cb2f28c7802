package faults

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/pgtest"
)

// TestMain runs the harness's child roles: the harness re-executes this test binary, which
// then runs a broker, ingest, evaluate or serve instead of the tests.
func TestMain(m *testing.M) {
	if IsChild() {
		os.Exit(RunChild())
	}
	os.Exit(m.Run())
}

// runHarness runs one small schedule and fails the test with the report unless it passed.
func runHarness(t *testing.T, cfg Config) *Report {
	t.Helper()
	cfg.Launch = SelfLauncher(os.Args[0])
	cfg.Dir = t.TempDir()
	cfg.Progress = t.Output()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !rep.Passed {
		t.Errorf("%s", b.String())
		for _, e := range rep.UnexpectedExits {
			t.Logf("log of %s (start %d), tail:\n%s", e.Process, e.Start, e.LogTail)
		}
		// The work directory goes with the test: keep what the processes logged in its output.
		logs, _ := filepath.Glob(filepath.Join(cfg.Dir, "logs", "*.log"))
		for _, path := range logs {
			t.Logf("%s, last 20 KB:\n%s", filepath.Base(path), tailOf(path, 20<<10))
		}
	} else {
		t.Logf("%s", b.String())
	}
	if rep.Attestations.Created == 0 || rep.Stored.TrailsChecked == 0 {
		t.Errorf("the run proved nothing: %d attestations answered 201, %d trails checked", rep.Attestations.Created, rep.Stored.TrailsChecked)
	}
	return rep
}

// TestDistributedUnderFaults runs ingest, two evaluators and the broker as processes on
// PostgreSQL under 32 writers, and kills -9 an evaluator, the broker and ingest, and ends the
// processes' PostgreSQL connections, once each.
func TestDistributedUnderFaults(t *testing.T) {
	dsn := pgtest.DSN(t)
	rep := runHarness(t, Config{Mode: Distributed, Postgres: dsn, Writers: 32, Rate: 400, Step: 200,
		StepTimeout: 15 * time.Second, DrainTimeout: 20 * time.Second})
	if len(rep.Faults) != 4 {
		t.Errorf("%d faults ran, want 4: %+v", len(rep.Faults), rep.Faults)
	}
}

// TestEmbeddedUnderFaults kills -9 serve twice at random moments under 32 writers.
func TestEmbeddedUnderFaults(t *testing.T) {
	rep := runHarness(t, Config{Mode: Embedded, Writers: 32, Rate: 300, Rounds: 2, Step: 100,
		StepTimeout: 15 * time.Second, DrainTimeout: 20 * time.Second})
	if len(rep.Faults) != 2 {
		t.Errorf("%d faults ran, want 2: %+v", len(rep.Faults), rep.Faults)
	}
}
