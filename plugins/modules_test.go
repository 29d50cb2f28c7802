// Package plugins_test checks the plugin SDK as a module of its own: what it depends on, and that
// its tests and the example plugin's pass when built against it alone, as a plugin author builds.
// They are separate modules, so `go test ./...` at the repository's root does not reach them;
// these tests run the go command in each.
package plugins_test

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// directRequires lists the modules a go.mod requires directly (not marked indirect).
func directRequires(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mods []string
	inBlock := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "require (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !inBlock:
			continue
		}
		if line == "" || strings.HasPrefix(line, "//") || strings.Contains(line, "// indirect") {
			continue
		}
		mods = append(mods, strings.Fields(line)[0])
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return mods
}

// TestSDKDependsOnLittle: a plugin author who adds the SDK gets go-plugin, gRPC and protobuf,
// not the server's OPA, Kafka clients or SQLite.
func TestSDKDependsOnLittle(t *testing.T) {
	allowed := []string{"github.com/hashicorp/go-plugin", "github.com/hashicorp/go-hclog",
		"google.golang.org/grpc", "google.golang.org/protobuf"}
	for _, m := range directRequires(t, "sdk/go.mod") {
		if !slices.Contains(allowed, m) {
			t.Errorf("plugins/sdk requires %s; the SDK may depend only on %v", m, allowed)
		}
	}
	if got := directRequires(t, "example/go.mod"); !slices.Equal(got, []string{"github.com/veritrail/veritrail/plugins/sdk"}) {
		t.Errorf("plugins/example requires %v, want only the SDK", got)
	}
}

// goIn runs the go command in a module's directory, on its own go.mod.
func goIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s in plugins/%s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}

// TestSDKModule runs the SDK module's own checks and tests: the conformance suite's, the gRPC
// contract's and the HTTP helpers'.
func TestSDKModule(t *testing.T) {
	goIn(t, "sdk", "vet", "./...")
	goIn(t, "sdk", "test", "./...")
}

// TestExampleModule builds the example plugin from its module, against the SDK alone, and runs
// its tests, which pass the plugin conformance suite in-process and through gRPC.
func TestExampleModule(t *testing.T) {
	goIn(t, "example", "vet", "./...")
	goIn(t, "example", "build", "-o", t.TempDir()+"/pager", ".")
	goIn(t, "example", "test", "./...")
}
