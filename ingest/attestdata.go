package ingest

import (
	"bytes"
	"encoding/json"
	"strings"
)

// commonKeys are the data_json keys of AttestationCommon, in the order of its fields.
var commonKeys = [...]string{
	"attestation_name", "origin_url", "description", "artifact_fingerprint", "target_artifacts",
	"git_commit_info", "repo_info", "external_urls", "annotations",
}

// decodeAttestationData decodes an attestation's data_json in one pass over its bytes: its
// values as raw JSON, and the common fields from those values. Decoding the whole body into
// AttestationCommon as well was a second pass over every byte of user_data. Apart from the text
// rules below, the result and every error are what decoding raw into AttestationCommon and
// into the map would give: whenever this path could differ (a key that
// matches a common field only regardless of case, as encoding/json matches keys, or any
// error), it decodes the whole body into AttestationCommon instead.
//
// The text rules (jsonTextOK) come first for any document that is JSON: a string the store
// cannot hold is a 400 naming it. They are checked on the whole body, with two vectorized scans
// (about 40 ns a kilobyte here), and not folded into the split's pass over each string, which
// cost up to 0.8 us a body of many small strings.
func decodeAttestationData(raw []byte) (AttestationCommon, map[string]json.RawMessage, error) {
	var common AttestationCommon
	fields, ok := splitObject(raw)
	if ok && !jsonTextOK(raw) {
		return common, nil, textError("data_json", raw)
	}
	if !ok {
		err := decodeJSONPart("data_json", raw, &fields)
		if (err == nil || validJSON(raw)) && !jsonTextOK(raw) {
			return common, nil, textError("data_json", raw)
		}
		if err != nil {
			if cerr := decodeJSONPart("data_json", raw, &common); cerr != nil {
				return common, nil, cerr // the error the body always got
			}
			return common, nil, err
		}
	}
	if foldedCommonKey(fields) {
		err := decodeJSONPart("data_json", raw, &common)
		return common, fields, err
	}
	// The common fields alone, as an object: a few small values (user_data is not among them).
	sub := []byte{'{'}
	for _, k := range commonKeys {
		v, ok := fields[k]
		if !ok {
			continue
		}
		if len(sub) > 1 {
			sub = append(sub, ',')
		}
		sub = append(append(append(append(sub, '"'), k...), '"', ':'), v...)
	}
	sub = append(sub, '}')
	if err := decodeJSONPart("data_json", sub, &common); err != nil {
		// Type errors: decode the whole body so that the first one in the body's order is named.
		common = AttestationCommon{}
		err = decodeJSONPart("data_json", raw, &common)
		return common, fields, err
	}
	return common, fields, nil
}

// foldedCommonKey reports whether a key of fields matches a common key only regardless of case.
func foldedCommonKey(fields map[string]json.RawMessage) bool {
	for k := range fields {
		for _, c := range commonKeys {
			if k != c && strings.EqualFold(k, c) {
				return true
			}
		}
	}
	return false
}

// splitObject returns the members of raw as raw values, as decoding it into a map of
// json.RawMessage would, when raw is one valid JSON object whose keys are plain ASCII without
// escapes: then one validating pass and one pass that only finds where each value ends do the
// work of the decoder's two scans and its copy per value. ok is false for anything else (any
// error included), which the caller decodes the ordinary way.
func splitObject(raw []byte) (fields map[string]json.RawMessage, ok bool) {
	if !validJSON(raw) {
		return nil, false
	}
	b := bytes.Clone(raw) // one copy that the values share, as each would have had its own
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return nil, false
	}
	fields = map[string]json.RawMessage{}
	i = skipSpace(b, i+1)
	if b[i] == '}' {
		return fields, true
	}
	for {
		// b is valid JSON, so a member is a string, a colon and a value, then a comma or the end.
		end := i + 1
		for ; b[end] != '"'; end++ {
			if c := b[end]; c == '\\' || c >= 0x80 {
				return nil, false // a key the decoder would unescape or repair
			}
		}
		key := string(b[i+1 : end])
		i = skipSpace(b, skipSpace(b, end+1)+1) // past the colon
		end = valueEnd(b, i)
		fields[key] = b[i:end:end]
		i = skipSpace(b, end)
		if b[i] == '}' {
			return fields, true
		}
		i = skipSpace(b, i+1) // past the comma
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the end of the valid JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	default: // a number, true, false or null: it ends where the object or a space resumes
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
		}
		return i
	}
}

// stringEnd returns the end of the valid JSON string that starts at b[i]: past the first quote
// that an even number of backslashes precedes.
func stringEnd(b []byte, i int) int {
	open := i
	for i++; ; {
		q := i + bytes.IndexByte(b[i:], '"')
		n := 0
		for k := q - 1; k > open && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}
