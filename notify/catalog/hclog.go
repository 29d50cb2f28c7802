package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// SlogLogger is an hclog.Logger for go-plugin that writes through log, so that the plugins'
// lines (go-plugin's own and the plugin processes' stderr, which go-plugin relays) come out in
// the process's one format (--log-format) rather than in hclog's beside it. hclog formats each
// line as JSON into a writer that decodes it and logs its message and fields with slog, at the
// line's level; lines below level are dropped by hclog before they are formatted.
func SlogLogger(log *slog.Logger, level hclog.Level) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "plugin", Level: level, JSONFormat: true, Output: &slogWriter{log: log},
		DisableTime: true})
}

// slogWriter receives hclog's JSON lines.
type slogWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte // a line not yet ended by a newline
}

func (w *slogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// line logs one of hclog's JSON lines; a line that is not JSON is logged as it is.
func (w *slogWriter) line(b []byte) {
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		w.log.Warn(string(b))
		return
	}
	msg, _ := fields["@message"].(string)
	level := hclogLevels[strings.ToLower(stringField(fields, "@level"))]
	attrs := make([]slog.Attr, 0, len(fields))
	if module := stringField(fields, "@module"); module != "" {
		attrs = append(attrs, slog.String("module", module))
	}
	for k, v := range fields {
		if !strings.HasPrefix(k, "@") {
			attrs = append(attrs, slog.Any(k, v))
		}
	}
	w.log.LogAttrs(context.Background(), level, msg, attrs...)
}

func stringField(fields map[string]any, key string) string {
	s, _ := fields[key].(string)
	return s
}

// hclogLevels maps hclog's level names to slog's; trace is below debug.
var hclogLevels = map[string]slog.Level{"trace": slog.LevelDebug - 4, "debug": slog.LevelDebug, "info": slog.LevelInfo,
	"warn": slog.LevelWarn, "error": slog.LevelError}
