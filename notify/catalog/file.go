package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"
)

// File is the operator's notifier configuration, a small YAML (or JSON) document:
//
//	plugin_dir: /var/lib/veritrail/plugins   # where plugin binaries live; a flag may override it
//	plugins:                                 # each pinned by SHA-256 (sha256sum's first column)
//	  - name: pager
//	    command: pager                       # relative to plugin_dir
//	    sha256: 3bb23e61e5edfcbd7152a6c462301df1eb2b1b069be6a506d7193b27d5dafd41
//	    args: []
//	    settings: {token: "…", severity: critical}
//	builtins:                                # settings of the built-in notifiers, by name
//	  email: {host: smtp.example.com, port: "587", from: "Veritrail <veritrail@example.com>"}
//	  webhook: {timeout: 10s}
//
// Unknown keys are errors, so a misspelt setting is not silently ignored.
type File struct {
	PluginDir string                       `yaml:"plugin_dir"`
	Plugins   []Entry                      `yaml:"plugins"`
	Builtins  map[string]map[string]string `yaml:"builtins"`
}

// LoadFile reads and decodes a catalog file.
func LoadFile(path string) (File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("catalog file: %w", err)
	}
	return ParseFile(b)
}

// ParseFile decodes a catalog file's content.
func ParseFile(b []byte) (File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) { // an empty file configures nothing
		return File{}, fmt.Errorf("catalog file: %w", err)
	}
	return f, nil
}
