// Package layers holds the test that keeps the repository's import arrows pointing down
// (docs/ARCHITECTURE.md, "Layout").
package layers

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/veritrail/veritrail/"

// layer is where a package of this module sits. A package may import packages of its own
// group (the same tier, say ingest and ingest/blobs) and packages of lower ranks; never a
// package of another group of the same or a higher rank.
type layer struct {
	group string
	rank  int
}

// layerOf places a package by its path inside the module: the commands on top, then the tiers,
// then the compliance rules and the plugins, then the shared machinery, and at the bottom the
// plugin SDK that plugin authors build against (with its test kit).
func layerOf(path string) layer {
	top, _, _ := strings.Cut(path, "/")
	switch {
	case top == "cmd":
		return layer{"cmd", 4}
	case top == "ingest" || top == "evaluate" || top == "notify":
		return layer{top, 3}
	case path == "plugins/sdk" || strings.HasPrefix(path, "plugins/sdk/"):
		return layer{"plugin sdk", 0}
	case top == "policies" || top == "plugins":
		return layer{top, 2}
	case top == "internal":
		return layer{"internal", 1}
	}
	return layer{top, -1}
}

type pkg struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
}

func TestImportsPointDown(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	seen := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		seen++
		from := strings.TrimPrefix(p.ImportPath, module)
		fl := layerOf(from)
		if fl.rank < 0 {
			t.Errorf("%s: top-level folder outside the layout (cmd, ingest, evaluate, notify, plugins, policies, internal)", from)
			continue
		}
		check := func(imports []string, kind string) {
			for _, imp := range imports {
				to, ok := strings.CutPrefix(imp, module)
				if !ok {
					continue
				}
				tl := layerOf(to)
				if tl.group != fl.group && tl.rank >= fl.rank {
					t.Errorf("%s imports %s%s: %s (rank %d) may import only its own group and lower ranks, not %s (rank %d)",
						from, to, kind, fl.group, fl.rank, tl.group, tl.rank)
				}
			}
		}
		check(p.Imports, "")
		check(p.TestImports, " in its tests")
		check(p.XTestImports, " in its tests")
	}
	if seen < 20 {
		t.Fatalf("go list found %d packages; the test is not looking at the module", seen)
	}
}

func TestLayerOf(t *testing.T) {
	for path, want := range map[string]layer{
		"cmd/veritrail/app":       {"cmd", 4},
		"ingest":                  {"ingest", 3},
		"notify/tier":             {"notify", 3},
		"policies/policyeval":     {"policies", 2},
		"plugins/builtin/webhook": {"plugins", 2},
		"plugins/sdk/safehttp":    {"plugin sdk", 0},
		"internal/store/sqlstore": {"internal", 1},
		"internal/bus/kafkabus":   {"internal", 1},
		"deploy/somewhere":        {"deploy", -1},
	} {
		if got := layerOf(path); got != want {
			t.Errorf("layerOf(%q) = %v, want %v", path, got, want)
		}
	}
}
