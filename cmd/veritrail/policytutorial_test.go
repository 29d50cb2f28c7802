package main

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
)

// updateTutorial rewrites the outputs in docs/policies.md with what the commands print now.
var updateTutorial = flag.Bool("update-tutorial", false, "rewrite the outputs of docs/policies.md with what its commands print")

const tutorialPath = "../../docs/policies.md"

// tutorialFile is a fenced block whose info string names a file ("```yaml prod-policy.yml"): the tutorial writes it.
var tutorialFile = regexp.MustCompile("(?ms)^```[a-z]+ ([A-Za-z0-9_.-]+)\n(.*?)^```\n")

// tutorialSession is a ```console block: "$ " commands, each followed by what it prints.
var tutorialSession = regexp.MustCompile("(?ms)^```console\n(.*?)^```\n")

// TestPolicyTutorial runs every command of docs/policies.md, in order, in a directory holding the files it writes,
// against an embedded server, and checks that each prints what the tutorial shows (stdout, then the error line
// main prints on stderr). veritrail commands run in this process; the others (curl, jq) in bash.
func TestPolicyTutorial(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" { // .ci/run installs them: in CI the tutorial is always checked
				t.Fatalf("the tutorial's commands need %s: %v", tool, err)
			}
			t.Skipf("the tutorial's commands need %s: %v", tool, err)
		}
	}
	docPath, err := filepath.Abs(tutorialPath) // before the test moves to the tutorial's directory
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	const org, token = "default", "vt_tutorial_test_token_0123456789a"
	r, err := app.StartEmbedded(context.Background(), app.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), BootstrapOrg: org,
		BootstrapToken: token, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	dir := t.TempDir()
	for _, m := range tutorialFile.FindAllSubmatch(doc, -1) {
		if err := os.WriteFile(filepath.Join(dir, string(m[1])), m[2], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("VERITRAIL_HOST", "http://"+r.Addr)
	t.Setenv("VERITRAIL_API_TOKEN", token)
	t.Setenv("VERITRAIL_ORG", org)
	t.Chdir(dir)

	sessions := tutorialSession.FindAllSubmatchIndex(doc, -1)
	if len(sessions) < 8 {
		t.Fatalf("the tutorial has %d console blocks", len(sessions))
	}
	var updated bytes.Buffer
	last := 0
	for _, s := range sessions {
		var block strings.Builder
		for _, step := range parseSession(string(doc[s[2]:s[3]])) {
			got := runTutorialCommand(t, step.command)
			if !*updateTutorial && got != step.output {
				t.Errorf("$ %s\nprints\n%s\nthe tutorial shows\n%s", step.command, got, step.output)
			}
			block.WriteString("$ " + strings.ReplaceAll(step.command, "\n", "\n  ") + "\n" + got)
		}
		updated.Write(doc[last:s[2]])
		updated.WriteString(block.String())
		last = s[3]
	}
	updated.Write(doc[last:])
	if *updateTutorial {
		if err := os.WriteFile(docPath, updated.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type tutorialStep struct{ command, output string }

// parseSession splits a console block into commands (a line ending in \ continues on the next, indented) and the
// output that follows each.
func parseSession(block string) []tutorialStep {
	var steps []tutorialStep
	lines := strings.SplitAfter(block, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if !strings.HasPrefix(line, "$ ") {
			if len(steps) > 0 {
				steps[len(steps)-1].output += line
			}
			continue
		}
		cmd := strings.TrimPrefix(strings.TrimSuffix(line, "\n"), "$ ")
		for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
			i++
			cmd += "\n" + strings.TrimPrefix(strings.TrimSuffix(lines[i], "\n"), "  ")
		}
		steps = append(steps, tutorialStep{command: cmd})
	}
	return steps
}

// runTutorialCommand runs one command and returns what a terminal would show.
func runTutorialCommand(t *testing.T, command string) string {
	t.Helper()
	if args, ok := strings.CutPrefix(command, "veritrail "); ok && !strings.ContainsAny(args, "|$\"'\\") {
		var out bytes.Buffer
		if err := run(context.Background(), strings.Fields(args), &out, &out); err != nil {
			out.WriteString("veritrail: " + err.Error() + "\n")
		}
		return out.String()
	}
	cmd := exec.Command("bash", "-o", "pipefail", "-c", command)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("$ %s: %v\n%s", command, err, out)
	}
	return string(out)
}
