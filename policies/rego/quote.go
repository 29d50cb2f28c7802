package rego

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Quote writes s as a Rego string literal (JSON string syntax, without HTML escaping), for code that generates
// Rego.
func Quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
