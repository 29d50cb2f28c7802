package main

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commandPaths walks the command tree: the arguments that reach every command, hidden ones too.
func commandPaths(cmd *cobra.Command, path []string, visit func([]string, *cobra.Command)) {
	visit(path, cmd)
	for _, sub := range cmd.Commands() {
		commandPaths(sub, append(append([]string(nil), path...), sub.Name()), visit)
	}
}

// TestHelpOfEveryCommand: -h and --help succeed for every command and subcommand and list the
// command's own flags, and no flag of another command.
func TestHelpOfEveryCommand(t *testing.T) {
	n := 0
	commandPaths(newRoot(), nil, func(path []string, cmd *cobra.Command) {
		n++
		for _, help := range []string{"-h", "--help"} {
			var out, errOut bytes.Buffer
			if err := run(context.Background(), append(append([]string(nil), path...), help), &out, &errOut); err != nil {
				t.Errorf("veritrail %s %s: %v", strings.Join(path, " "), help, err)
				continue
			}
			if !strings.Contains(out.String(), "Usage:") {
				t.Errorf("veritrail %s %s printed no usage:\n%s%s", strings.Join(path, " "), help, out.String(), errOut.String())
			}
			cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if !strings.Contains(out.String(), "--"+f.Name) {
					t.Errorf("veritrail %s %s does not list --%s", strings.Join(path, " "), help, f.Name)
				}
			})
		}
	})
	if n < 20 {
		t.Errorf("walked %d commands", n)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"admin", "create-org", "-h"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"--yes-really", "--display-name", "--role", "--secret", "--state", "--wait", "--addr"} {
		if strings.Contains(out.String(), other) {
			t.Errorf("admin create-org -h lists %s, a flag of another command:\n%s", other, out.String())
		}
	}
	for _, own := range []string{"--data-dir", "--postgres", "--config", "VERITRAIL_DATA_DIR"} {
		if !strings.Contains(out.String(), own) {
			t.Errorf("admin create-org -h lacks %s:\n%s", own, out.String())
		}
	}
}

// TestServeHelpListsEverySettingWithItsEnvironment, the bootstrap secret included (it has no flag).
func TestServeHelpListsEverySettingWithItsEnvironment(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"serve", "-h"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--data-dir", "VERITRAIL_DATA_DIR", "--consistency-wait", "VERITRAIL_CONSISTENCY_WAIT", "--notify-budget",
		"--bootstrap-org", "VERITRAIL_BOOTSTRAP_ORG", "VERITRAIL_BOOTSTRAP_TOKEN", "--config", "VERITRAIL_CONFIG"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve -h lacks %s", want)
		}
	}
	if strings.Contains(out.String(), "--kafka-brokers") || strings.Contains(out.String(), "--bootstrap-token") {
		t.Errorf("serve -h lists flags it does not have:\n%s", out.String())
	}
}

// TestInvalidEnvironmentStopsTheTier: before anything starts, an invalid VERITRAIL_* value of
// the command's settings is an error naming the variable and the value.
func TestInvalidEnvironmentStopsTheTier(t *testing.T) {
	for _, c := range []struct{ cmd, name, value string }{
		{"serve", "VERITRAIL_CONSISTENCY_WAIT", "soon"},
		{"ingest", "VERITRAIL_MAX_BACKLOG", "lots"},
		{"notify", "VERITRAIL_NOTIFY_CONCURRENCY", "0"},
		{"evaluate", "VERITRAIL_KAFKA_PARTITIONS", "many"},
	} {
		t.Run(c.cmd, func(t *testing.T) {
			t.Setenv(c.name, c.value)
			err := run(context.Background(), []string{c.cmd, "--data-dir", t.TempDir()}, io.Discard, io.Discard)
			if c.cmd != "serve" {
				err = run(context.Background(), []string{c.cmd}, io.Discard, io.Discard)
			}
			if err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), `"`+c.value+`"`) {
				t.Errorf("error %v, want one naming %s and %q", err, c.name, c.value)
			}
		})
	}
	t.Setenv("VERITRAIL_CONSISTENCY_WAIT", "1s")
	t.Setenv("VERITRAIL_RATE_LIMIT_KEY", "5")
	t.Setenv("VERITRAIL_RATE_LIMIT_KEY_BURST", "0")
	err := run(context.Background(), []string{"serve", "--data-dir", t.TempDir()}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--rate-limit-key-burst must be at least 1") {
		t.Errorf("a rate limit without a burst: %v", err)
	}
}

// TestCommandErrors: no command, an unknown one, an unknown subcommand, extra arguments.
func TestCommandErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"bench"}, `unknown command "bench"`},
		{[]string{"admin"}, "no admin subcommand given"},
		{[]string{"admin", "-x"}, "unknown shorthand flag"},
		{[]string{"admin", "frob"}, `unknown admin subcommand "frob"`},
		{[]string{"admin", "create-org"}, "usage: veritrail admin create-org NAME"},
		{[]string{"serve", "extra"}, `unknown command "extra"`},
		{[]string{"serve", "--addr"}, "flag needs an argument"},
	} {
		var errOut bytes.Buffer
		err := run(context.Background(), c.args, io.Discard, &errOut)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("veritrail %v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// TestVersion: `version` and `--version` print the module, the commit and the Go version.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"veritrail ", "module:  github.com/veritrail/veritrail", "commit:  ", "go:      " + runtime.Version()} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v printed %q, without %q", args, out.String(), want)
			}
		}
	}
	got := describeBuild(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/veritrail/veritrail", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "085c4de"}, {Key: "vcs.time", Value: "2026-11-25T18:00:00Z"},
			{Key: "vcs.modified", Value: "true"}}})
	want := "veritrail v1.4.0\nmodule:  github.com/veritrail/veritrail\ncommit:  085c4de (2026-11-25T18:00:00Z), modified\ngo:      go1.26.8\n"
	if got != want {
		t.Errorf("describeBuild = %q, want %q", got, want)
	}
}

// TestSingleDashLongFlags: -name and -name=value, which the standard flag package accepted, still
// work; short flags, negative numbers and arguments after "--" are left alone.
func TestSingleDashLongFlags(t *testing.T) {
	got := singleDashLongFlags(newRoot(), []string{"serve", "-addr", ":1", "-data-dir=d", "-h", "-v", "--postgres", "-1", "-nosuch", "--", "-addr"})
	want := []string{"serve", "--addr", ":1", "--data-dir=d", "-h", "-v", "--postgres", "-1", "-nosuch", "--", "-addr"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %q, want %q", got, want)
	}
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"admin", "create-org", "acme", "-data-dir", dir}, &out, io.Discard); err != nil ||
		out.String() != "created organization acme\n" {
		t.Fatalf("admin create-org acme -data-dir DIR: %v %q", err, out.String())
	}
}
