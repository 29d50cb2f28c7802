package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/google/uuid"
)

// newID names a message or a record, in the hosted service's form: 28 lowercase hex digits
// grouped 8-4-4-4-8, which clients see in html_url query strings (artifact_id, attestation_id).
// It is a version 7 UUID without its last four digits: those begin with their time, so the rows
// one evaluator transaction inserts (applied marks, attestations, audit records, all keyed by
// such an ID) fall on the same few index pages instead of one random page each (on SQLite every
// page a commit touches is a write, and random IDs made those writes a quarter of the
// evaluator's work), and 58 random bits remain per millisecond.
func newID() string {
	id, err := uuid.NewV7()
	if err != nil { // the clock or the random source failed: a random ID is as unique
		id = uuid.New()
	}
	return hostedForm(id)
}

// hostedForm writes the first 14 bytes of id as 8-4-4-4-8 lowercase hex.
func hostedForm(id uuid.UUID) string {
	s := id.String() // 8-4-4-4-12
	return s[:32]
}

// isJSONNull reports whether raw is absent or the literal null.
func isJSONNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// checkObject requires raw, when given, to be a JSON object.
func checkObject(c checker, field string, raw json.RawMessage) {
	if isJSONNull(raw) {
		return
	}
	// An object, without decoding it into a map only to drop it (a tenth of the cost of the
	// attestation handler's repo_info check, which every CI attestation has).
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' || !validJSON(t) {
		c[field] = notDictionary(raw)
	}
}

// notDictionary is the hosted service's complaint about a value that is not an object, with the
// value as pydantic echoes it (a string without its quotes: `[input: ]` for "").
func notDictionary(raw json.RawMessage) string {
	return "Input should be a valid dictionary [input: " + inputEcho(raw) + "]"
}

// inputEcho is a JSON value as pydantic's "[input: ...]" shows it: a string unquoted, anything
// else as its JSON text.
func inputEcho(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return echo(s)
	}
	return echo(string(raw))
}

// checkOriginURL requires origin_url, when given, to be an absolute URL; the hosted service
// (pydantic) refuses an empty one in these words, and a relative one.
func checkOriginURL(c checker, field string, v *string) {
	switch {
	case v == nil:
	case *v == "":
		c[field] = "Input should be a valid URL, input is empty"
	default:
		if u, err := url.Parse(*v); err != nil || u.Scheme == "" {
			c[field] = fmt.Sprintf("Input should be a valid URL, relative URL without a base [input: %s]", echo(*v))
		}
	}
}

// checkExternalURLs checks external_urls, {label: {href, fingerprint?}}: an object whose
// fingerprints, when given, are SHA-256 digests (the server validates them; the CLI only checks
// that each label has a URL).
func checkExternalURLs(c checker, field string, raw json.RawMessage) {
	if isJSONNull(raw) {
		return
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		c[field] = notDictionary(raw)
		return
	}
	for label, v := range m {
		var u struct {
			Fingerprint *string `json:"fingerprint"`
		}
		if json.Unmarshal(v, &u) != nil {
			continue // an entry that is a bare URL string is kept as sent
		}
		if u.Fingerprint != nil && !fingerprintRE.MatchString(*u.Fingerprint) {
			c[field+"."+label+".fingerprint"] = patternError(fingerprintPattern, *u.Fingerprint)
		}
	}
}

// commitInfo is the git commit object the CLI sends.
type commitInfo struct {
	Sha1           string          `json:"sha1"`
	Message        string          `json:"message"`
	Author         string          `json:"author"`
	AuthorUsername *string         `json:"author_username,omitempty"`
	Branch         string          `json:"branch"`
	Timestamp      json.Number     `json:"timestamp"`
	URL            *string         `json:"url,omitempty"`
	Parents        []string        `json:"parents,omitempty"`
	Verified       *bool           `json:"verified,omitempty"`
	SignatureState *string         `json:"signature_state,omitempty"`
	Extra          json.RawMessage `json:"-"`
}

// checkCommitInfo validates a git commit object when given.
func checkCommitInfo(c checker, field string, raw json.RawMessage) {
	if isJSONNull(raw) {
		return
	}
	var ci commitInfo
	if err := json.Unmarshal(raw, &ci); err != nil {
		c[field] = fmt.Sprintf("Input should be a valid git commit object: %s", jsonErrorText(err))
		return
	}
	if ci.Sha1 == "" {
		c[field+".sha1"] = "Field required"
	}
	if ci.Timestamp != "" {
		if _, err := ci.Timestamp.Float64(); err != nil {
			c[field+".timestamp"] = "Input should be a valid number"
		}
	}
}

func commitSha(raw json.RawMessage) string {
	var ci struct {
		Sha1 string `json:"sha1"`
	}
	_ = json.Unmarshal(raw, &ci)
	return ci.Sha1
}

func itoa(i int) string { return strconv.Itoa(i) }
