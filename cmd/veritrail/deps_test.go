package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProductLinksNoTools: the product binary links neither the benchmark (cmd/veritrail-bench)
// nor the in-process Kafka broker the benchmark and the development broker run on.
func TestProductLinksNoTools(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), out)
	}
	for _, dep := range deps {
		for _, banned := range []string{"github.com/twmb/franz-go/pkg/kfake", "github.com/veritrail/veritrail/cmd/veritrail-bench",
			"github.com/veritrail/veritrail/internal/devkafka"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("cmd/veritrail depends on %s", dep)
			}
		}
	}
}
