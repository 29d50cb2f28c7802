package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/cmd/veritrail-bench/faults"
)

// TestMain runs the harness's child roles, as main does: the command re-executes its own
// binary, here the test binary.
func TestMain(m *testing.M) {
	if faults.IsChild() {
		os.Exit(faults.RunChild())
	}
	os.Exit(m.Run())
}

// TestFaultsCommandPrintsTheReport runs a short embedded schedule through the command: it
// starts serve by re-executing its binary, kills it once and prints the report as JSON.
func TestFaultsCommandPrintsTheReport(t *testing.T) {
	var out, progress bytes.Buffer
	err := run(t.Context(), []string{"faults", "--mode", "embedded", "--duration", "0", "--writers", "4", "--rate", "200",
		"--step", "40", "--fault-every", "0", "--drain-timeout", "20s", "--work-dir", t.TempDir()}, &out, &progress)
	if err != nil && !errors.Is(err, errProblems) {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var rep faults.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("the output is not a JSON report: %v\n%s", err, out.String())
	}
	if rep.Mode != "embedded" || rep.Writers != 4 || len(rep.Faults) != 1 || rep.Faults[0].Fault != "kill -9 serve" ||
		rep.Attestations.Created == 0 || rep.Stored.TrailsChecked == 0 {
		t.Errorf("report: %s", out.String())
	}
	if (err == nil) != rep.Passed {
		t.Errorf("the command returned %v for a report with passed=%v", err, rep.Passed)
	}
	if !strings.Contains(progress.String(), "fault: kill -9 serve") {
		t.Errorf("no progress on stderr:\n%s", progress.String())
	}
}

func TestFaultsCommandRejectsBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"faults", "--mode", "both"}, `--mode must be distributed or embedded, got "both"`},
		{[]string{"faults", "--mode", "distributed", "--postgres", ""}, "the distributed mode needs --postgres"},
		{[]string{"faults", "extra"}, "unexpected arguments"},
		{[]string{"bench", "extra"}, "unexpected arguments"},
		{[]string{"bench", "--duration", "soon"}, `invalid value "soon" for flag -duration`},
		{[]string{"nope"}, `unknown command "nope"`},
	} {
		err := run(t.Context(), c.args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// TestHelpSucceeds: -h prints a command's flags and is not an error.
func TestHelpSucceeds(t *testing.T) {
	for _, cmd := range []string{"bench", "faults"} {
		var stderr bytes.Buffer
		if err := run(t.Context(), []string{cmd, "-h"}, &bytes.Buffer{}, &stderr); err != nil {
			t.Errorf("%s -h: %v", cmd, err)
		}
		if !strings.Contains(stderr.String(), "-duration") {
			t.Errorf("%s -h printed no flags:\n%s", cmd, stderr.String())
		}
	}
}
