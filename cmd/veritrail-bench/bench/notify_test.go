package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRunNotifyEndToEnd runs the notify phase for a few reports: the numbers mean nothing at
// this length; the test proves that every measured report's trigger reached the webhook.
func TestRunNotifyEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded product")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := RunNotify(ctx, Config{NotifyReports: 5, SnapshotArtifacts: 10, Progress: &progress})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	if res.Report.Count != 5 || res.Notify.Count != 5 || res.Notify.P50ms <= 0 || res.Notify.P99ms < res.Notify.P50ms ||
		res.Settings.RunningArtifacts != 5 || res.TargetP99ms != 250 {
		t.Errorf("result %+v", res)
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"201 to the webhook's receipt", "report sent to its 201", "p99 under 250 ms"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if _, err := json.Marshal(res); err != nil {
		t.Fatal(err)
	}
}
