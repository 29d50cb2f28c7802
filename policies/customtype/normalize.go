package customtype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

const rootPath = "attestation_data"

type normalizeError struct {
	path string
	msg  string
}

func (e *normalizeError) Error() string { return e.path + ": " + e.msg }

// normalize deep-copies data into the plain JSON shapes both libraries accept
// (map[string]any, []any, string, bool, nil, numbers). gojq panics on other Go
// types, so typed maps, structs and sized integers are converted through their
// JSON encoding. With forJQ, json.Number becomes int, *big.Int or float64 (the
// number types gojq computes with); otherwise numbers are kept as given, which
// jsonschema compares exactly.
func normalize(data any, forJQ bool) (any, error) {
	return normalizeAt(data, forJQ, rootPath)
}

func normalizeAt(data any, forJQ bool, path string) (any, error) {
	switch v := data.(type) {
	case nil, bool, string, int:
		return v, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, &normalizeError{path, "number is not finite"}
		}
		return v, nil
	case json.Number:
		if !isJSONNumber(string(v)) {
			return nil, &normalizeError{path, fmt.Sprintf("%q is not a JSON number", string(v))}
		}
		if forJQ {
			return jqNumber(v), nil
		}
		return v, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			n, err := normalizeAt(e, forJQ, childPath(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			n, err := normalizeAt(e, forJQ, indexPath(path, i))
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, &normalizeError{path, fmt.Sprintf("cannot be encoded as JSON: %v", err)}
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var decoded any
		if err := dec.Decode(&decoded); err != nil {
			return nil, &normalizeError{path, fmt.Sprintf("cannot be encoded as JSON: %v", err)}
		}
		return normalizeAt(decoded, forJQ, path)
	}
}

func isJSONNumber(s string) bool {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	return json.Valid([]byte(s))
}

// jqNumber mirrors how gojq itself reads JSON numbers: exact ints where they
// fit, arbitrary precision for larger integers, float64 otherwise.
func jqNumber(n json.Number) any {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 0); err == nil {
		return int(i)
	}
	if !strings.ContainsAny(s, ".eE") {
		if b, ok := new(big.Int).SetString(s, 10); ok {
			return b
		}
	}
	// Out-of-range values come back as ±Inf, which gojq treats like jq does.
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// childPath renders an object member as ".key", or `["key"]` when the key is
// not a plain word, so the path stays unambiguous.
func childPath(parent, key string) string {
	if isPlainKey(key) {
		return parent + "." + key
	}
	return parent + "[" + strconv.Quote(key) + "]"
}

func indexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

func isPlainKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
