package catalog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestSlogLoggerWritesThroughSlog: go-plugin's logger writes one line of the process's format
// per entry, at its level, with its fields and the plugin's module; entries below the level
// are dropped.
func TestSlogLoggerWritesThroughSlog(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := SlogLogger(log, hclog.Info).Named("pager")
	l.Debug("dropped")
	l.Warn("plugin process exited; restarting it", "starts", 2)
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", out.String(), err)
	}
	if line["level"] != "WARN" || line["msg"] != "plugin process exited; restarting it" || line["starts"] != float64(2) ||
		line["module"] != "plugin.pager" {
		t.Fatalf("line %v", line)
	}
}
