package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/cmd/veritrail-bench/k8spod"
	"github.com/veritrail/veritrail/internal/store"
)

// TestRunSnapshotsEndToEnd runs the snapshot phases for a moment in both modes: the numbers
// mean nothing at this length, the test proves that every accepted report is matched to what
// the evaluator applied.
func TestRunSnapshotsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded product")
	}
	for _, repeat := range []bool{false, true} {
		t.Run(map[bool]string{false: modeAlternate, true: modeRepeat}[repeat], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var progress bytes.Buffer
			res, err := RunSnapshots(ctx, Config{Duration: 300 * time.Millisecond, Concurrency: 3, SnapshotArtifacts: 21,
				SnapshotRepeat: repeat, DrainTimeout: 30 * time.Second, Progress: &progress})
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
				t.Errorf("last sample %+v, want every accepted report applied (%d)", last, ev.Accepted)
			}
			if res.VisibleMaxms < res.VisibleP50ms || res.Ratio <= 0 {
				t.Errorf("visible p50 %v max %v, ratio %v", res.VisibleP50ms, res.VisibleMaxms, res.Ratio)
			}
			if s := res.Settings; s.ReportItems != 21 || s.RunningArtifacts != 11 || s.Mode != map[bool]string{false: modeAlternate, true: modeRepeat}[repeat] {
				t.Errorf("settings %+v", s)
			}
			var table bytes.Buffer
			if err := res.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"bare Huma JSON PUT", "ingest / bare", "visible after the 201", "evaluator kept up"} {
				if !strings.Contains(table.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, table.String())
				}
			}
			if _, err := json.Marshal(res); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestK8sReports: the two sets are reports as the CLI sends them and differ in exactly one
// deployment, both of its pods.
func TestK8sReports(t *testing.T) {
	sets, running, err := k8sReports(200)
	if err != nil {
		t.Fatal(err)
	}
	if running != 100 {
		t.Errorf("running %d, want 100", running)
	}
	var a, b struct{ Artifacts []k8spod.Pod }
	if err := json.Unmarshal(sets[0], &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sets[1], &b); err != nil {
		t.Fatal(err)
	}
	if len(a.Artifacts) != 200 || len(b.Artifacts) != 200 {
		t.Fatalf("%d and %d pods, want 200", len(a.Artifacts), len(b.Artifacts))
	}
	images := map[string]bool{}
	differ := 0
	for i, p := range a.Artifacts {
		if len(p.Digests) != 1 || len(p.Owners) != 1 || p.PodName == "" || p.Namespace == "" || p.CreationTimestamp == 0 {
			t.Fatalf("pod %+v", p)
		}
		for name, fp := range p.Digests {
			images[name+"@"+fp] = true
			if len(fp) != 64 {
				t.Errorf("fingerprint %q", fp)
			}
		}
		if p.PodName != b.Artifacts[i].PodName {
			differ++
		}
	}
	if len(images) != 100 || differ != replicas {
		t.Errorf("%d distinct images, %d pods differ; want 100 and %d", len(images), differ, replicas)
	}
}

// fakeEnvs answers EnvironmentByID with a fixed last_reported_at.
type fakeEnvs struct {
	store.Store
	last float64
}

func (f fakeEnvs) EnvironmentByID(context.Context, string, string) (store.Environment, error) {
	return store.Environment{LastReportedAt: f.last}, nil
}

// TestRepeatAppliedMatchesLastReportedAt: repeating, a report counts as applied when
// last_reported_at (ingest's publish time, microseconds) is at or after its send time.
func TestRepeatAppliedMatchesLastReportedAt(t *testing.T) {
	t0 := time.UnixMicro(1786425000_000000)
	r := newReporters("http://x", 1, [2][]byte{}, true)
	r.envIDs = []string{"e"}
	for k := range 3 {
		sent := t0.Add(time.Duration(k) * time.Millisecond)
		r.accepted(0, sent, sent.Add(500*time.Microsecond))
	}
	for _, c := range []struct {
		last time.Time
		want int
	}{
		{t0.Add(-time.Microsecond), 0},
		{t0, 1}, // published within the microsecond it was sent
		{t0.Add(1500 * time.Microsecond), 2},
		{t0.Add(time.Second), 3},
	} {
		r.st = fakeEnvs{last: float64(c.last.UnixMicro()) / 1e6}
		r.seen[0] = 0
		if got, err := r.applied(context.Background()); err != nil || got != c.want {
			t.Errorf("last_reported_at %v: applied %d (%v), want %d", c.last.Sub(t0), got, err, c.want)
		}
	}
}
