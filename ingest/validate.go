package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-json-experiment/json/jsontext"
)

// Patterns of the interface specification and the client contract (CLIENT-2.md, section 5).
const (
	flowNamePattern    = `^[a-zA-Z0-9][a-zA-Z0-9\.\-_~]*$`
	trailNamePattern   = `^[a-zA-Z0-9][a-zA-Z0-9\-_.~]*$`
	fingerprintPattern = `^[a-f0-9]{64}$`
	gitCommitPattern   = `^[a-f0-9]{40}$`
	templateRefPattern = `^[a-zA-Z0-9\-_]+$`
	shortFPPattern     = `^[a-f0-9]{5,64}$`
	typeNamePattern    = `^[a-zA-Z0-9][a-zA-Z0-9\-_.]*$`
	// envNamePattern has no ~, which snapshot expressions use (prod~1).
	envNamePattern = `^[a-zA-Z0-9][a-zA-Z0-9\.\-_]*$`
	// controlIDPattern may begin with any of its characters, unlike the other names.
	controlIDPattern = `^[a-zA-Z0-9\-._~]+$`
	// policyNamePattern: the contract is silent; the flow pattern, which policies always had.
	policyNamePattern = flowNamePattern
)

var (
	flowNameRE    = regexp.MustCompile(flowNamePattern)
	trailNameRE   = regexp.MustCompile(trailNamePattern)
	fingerprintRE = regexp.MustCompile(fingerprintPattern)
	gitCommitRE   = regexp.MustCompile(gitCommitPattern)
	templateRefRE = regexp.MustCompile(templateRefPattern)
	shortFPRE     = regexp.MustCompile(shortFPPattern)
	typeNameRE    = regexp.MustCompile(typeNamePattern)
	envNameRE     = regexp.MustCompile(envNamePattern)
	controlIDRE   = regexp.MustCompile(controlIDPattern)
	policyNameRE  = flowNameRE
)

// maxNameLen bounds every user-given name, in characters: the contract gives no length for any
// of them.
const maxNameLen = 256

// checker collects every field error of a request so the caller hears about all of them at once.
type checker map[string]string

func (c checker) required(field, v string) bool {
	if v == "" {
		c[field] = "Field required"
		return false
	}
	return true
}

func (c checker) match(field, v string, re *regexp.Regexp, pattern string) {
	if !re.MatchString(v) {
		c[field] = patternError(pattern, v)
	}
}

// matchOptional checks a value only when it is given.
func (c checker) matchOptional(field string, v *string, re *regexp.Regexp, pattern string) {
	if v != nil && *v != "" {
		c.match(field, *v, re, pattern)
	}
}

// name checks a required user-given name: nameProblem, then the pattern when there is one (re
// nil: any characters but those nameProblem refuses).
func (c checker) name(field, v string, re *regexp.Regexp, pattern string) bool {
	if !c.required(field, v) {
		return false
	}
	if msg := nameProblem(v, maxNameLen); msg != "" {
		c[field] = msg
		return false
	}
	if re != nil && !re.MatchString(v) {
		c[field] = patternError(pattern, v)
		return false
	}
	return true
}

// optionalName checks a name only when it is given.
func (c checker) optionalName(field string, v *string, re *regexp.Regexp, pattern string) {
	if v != nil && *v != "" {
		c.name(field, *v, re, pattern)
	}
}

func (c checker) err() error {
	if len(c) == 0 {
		return nil
	}
	return validationFailed(c)
}

const shortHexPattern = `^[a-f0-9]{5,64}$`

var shortHexRE = shortFPRE

// Texts of the text rules, in the hosted service's (pydantic's) words where it has them.
const (
	msgNotUnicode = "Input should be a valid string, unable to parse raw data as a unicode string"
	msgNUL        = `String should not contain the NUL character (\u0000)`
)

// nameProblem words what makes v unfit as a name, or is "": invalid UTF-8, more than limit
// characters, or a control character (C0, DEL, C1) or bidirectional override or isolate, which
// would make a name display as something it is not.
func nameProblem(v string, limit int) string {
	if !utf8.ValidString(v) {
		return fmt.Sprintf("%s [input: %s]", msgNotUnicode, echo(v))
	}
	if n := utf8.RuneCountInString(v); n > limit {
		return fmt.Sprintf("String should have at most %d characters [input: %s]", limit, echo(v))
	}
	for _, r := range v {
		if forbiddenInName(r) {
			return fmt.Sprintf("String should not contain control or bidirectional formatting characters, found U+%04X [input: %s]", r, echo(v))
		}
	}
	return ""
}

func forbiddenInName(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// echoLimit is how many characters of a value an error text repeats.
const echoLimit = 100

// echo is a value as an error text repeats it: what is not graphic (controls, formatting
// characters, bytes that are not UTF-8) escaped, so that the text shows what was sent, and at
// most echoLimit characters of it.
func echo(v string) string {
	var b strings.Builder
	for i, n := 0, 0; i < len(v); n++ {
		if n == echoLimit {
			b.WriteString("...")
			break
		}
		r, size := utf8.DecodeRuneInString(v[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, v[i])
		case !unicode.IsGraphic(r) && r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsGraphic(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// The JSON text rules: every string of a JSON document (keys included) must be valid UTF-8
// without an escaped NUL, which neither a PostgreSQL text column nor jsonb can hold.
// encoding/json would quietly replace the invalid bytes with U+FFFD, and the store would
// refuse the NUL only after ingest had answered 201.

var nulEscape = []byte(`\u0000`)

// validJSON is json.Valid (repeated names and invalid UTF-8 are syntax it accepts) on
// go-json-experiment's scanner, which checks a 1 KB body in a quarter of the time
// (BenchmarkValidJSON); TestValidJSONAsEncodingJSON and FuzzValidJSON hold the two to one
// answer. Every JSON check of ingest goes through it.
func validJSON(raw []byte) bool {
	return jsontext.Value(raw).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// jsonTextOK reports whether every string of the valid JSON text raw follows the rules. Valid
// JSON is ASCII outside its strings, so the text is checked whole, with two vectorized scans.
func jsonTextOK(raw []byte) bool {
	return utf8.Valid(raw) && !hasNULEscape(raw)
}

// hasNULEscape reports whether s holds the escape \u0000: a backslash that starts an escape
// (the last of an odd run of backslashes) followed by u0000.
func hasNULEscape(s []byte) bool {
	for {
		i := bytes.Index(s, nulEscape)
		if i < 0 {
			return false
		}
		n := 1
		for k := i - 1; k >= 0 && s[k] == '\\'; k-- {
			n++
		}
		if n%2 == 1 {
			return true
		}
		s = s[i+1:] // s[i+1] is 'u': a later run of backslashes cannot reach back past it
	}
}

// checkJSONText is nil when raw, a JSON document the caller decoded or validated, follows the
// text rules; otherwise a 400 naming the first string that does not, by its path (user_data.a[0].b),
// or part when that is the document's own top level.
func checkJSONText(part string, raw []byte) error {
	if jsonTextOK(raw) {
		return nil
	}
	return textError(part, raw)
}

// textError is the 400 for a document that jsonTextOK refused.
func textError(part string, raw []byte) *Error {
	path, msg, ok := badString(raw)
	if !ok { // not a document the walk could follow: name the part
		path, msg = "", msgNUL
		if !utf8.Valid(raw) {
			msg = msgNotUnicode
		}
	}
	if path == "" {
		path = part
	}
	return fieldError(path, "%s", msg)
}

// textPartProblem words what keeps a file part that is stored as text (a template, a schema, a
// policy) from being stored: bytes that are not UTF-8, or a NUL. "" when none.
func textPartProblem(b []byte) string {
	switch {
	case !utf8.Valid(b):
		return msgNotUnicode
	case bytes.IndexByte(b, 0) >= 0:
		return "File should not contain the NUL character"
	}
	return ""
}

// badString walks the JSON document b to its first string (key or value) that breaks the text
// rules and returns where it is and why. ok is false when it finds none, or when b is not JSON
// it can walk; it never reads past b.
func badString(b []byte) (path, msg string, ok bool) {
	w := walker{b: b}
	w.value("")
	return w.path, w.msg, w.found
}

type walker struct {
	b      []byte
	i      int
	path   string
	msg    string
	found  bool
	broken bool
}

func (w *walker) stop() bool { return w.found || w.broken }

func (w *walker) space() {
	for w.i < len(w.b) && isJSONSpace(w.b[w.i]) {
		w.i++
	}
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// expect consumes c, or marks the document broken.
func (w *walker) expect(c byte) bool {
	w.space()
	if w.i >= len(w.b) || w.b[w.i] != c {
		w.broken = true
		return false
	}
	w.i++
	return true
}

func (w *walker) value(path string) {
	w.space()
	if w.i >= len(w.b) {
		w.broken = true
		return
	}
	switch w.b[w.i] {
	case '"':
		s, ok := w.str()
		if ok {
			if p := stringProblem(s); p != "" {
				w.path, w.msg, w.found = path, fmt.Sprintf("%s [input: %s]", p, echo(string(s))), true
			}
		}
	case '{':
		w.i++
		w.space()
		if w.i < len(w.b) && w.b[w.i] == '}' {
			w.i++
			return
		}
		for !w.stop() {
			w.space()
			k, ok := w.str()
			if !ok {
				return
			}
			if p := keyProblem(k); p != "" {
				w.path, w.msg, w.found = path, fmt.Sprintf("%s [input: %s]", p, echo(string(k))), true
				return
			}
			if !w.expect(':') {
				return
			}
			w.value(joinPath(path, decodeKey(k)))
			if w.stop() {
				return
			}
			w.space()
			if w.i < len(w.b) && w.b[w.i] == '}' {
				w.i++
				return
			}
			w.expect(',')
		}
	case '[':
		w.i++
		w.space()
		if w.i < len(w.b) && w.b[w.i] == ']' {
			w.i++
			return
		}
		for n := 0; !w.stop(); n++ {
			w.value(fmt.Sprintf("%s[%d]", path, n))
			if w.stop() {
				return
			}
			w.space()
			if w.i < len(w.b) && w.b[w.i] == ']' {
				w.i++
				return
			}
			w.expect(',')
		}
	default: // a number or a literal
		start := w.i
		for w.i < len(w.b) && !bytes.ContainsRune([]byte(",:{}[]\" \t\r\n"), rune(w.b[w.i])) {
			w.i++
		}
		if w.i == start {
			w.broken = true
		}
	}
}

// str reads the string at w.i and returns its raw bytes, escapes as written, without the quotes.
func (w *walker) str() ([]byte, bool) {
	if w.i >= len(w.b) || w.b[w.i] != '"' {
		w.broken = true
		return nil, false
	}
	start := w.i + 1
	for j := start; j < len(w.b); j++ {
		switch w.b[j] {
		case '\\':
			j++
		case '"':
			w.i = j + 1
			return w.b[start:j], true
		}
	}
	w.broken = true
	return nil, false
}

// stringProblem words what breaks the text rules in the raw bytes of a JSON string, or is "".
func stringProblem(s []byte) string {
	switch {
	case !utf8.Valid(s):
		return msgNotUnicode
	case hasNULEscape(s):
		return msgNUL
	}
	return ""
}

// keyProblem is stringProblem for a key.
func keyProblem(s []byte) string {
	switch {
	case !utf8.Valid(s):
		return "Keys should be valid strings, unable to parse raw data as a unicode string"
	case hasNULEscape(s):
		return `Keys should not contain the NUL character (\u0000)`
	}
	return ""
}

// decodeKey is a key as a field path names it: unescaped when it is a valid JSON string.
func decodeKey(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw)
	}
	var s string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s); err != nil {
		return string(raw)
	}
	return s
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// errBodyText is what checkedJSON answers for a body that breaks the text rules; the error hook
// finds and names the string (describeDetail).
var errBodyText = errors.New("body breaks the text rules")

// checkedJSON is Huma's JSON format with the text rules applied to a request body before it is
// decoded, since encoding/json would quietly replace bytes that are not UTF-8. Only a body that
// is JSON is refused for its text: otherwise the decoder's syntax error is the answer.
func checkedJSON() huma.Format {
	return huma.Format{
		Marshal: huma.DefaultJSONFormat.Marshal,
		Unmarshal: func(data []byte, v any) error {
			if !jsonTextOK(data) && validJSON(data) {
				return errBodyText
			}
			return json.Unmarshal(data, v)
		},
	}
}

// checkParams applies the text rules to an operation's path and query parameters: a value with a
// NUL or bytes that are not UTF-8 is a 400 naming the parameter, before anything looks it up (a
// PostgreSQL text parameter cannot even hold it). The path and the raw query are checked whole
// first, so a request without such a value pays one short scan.
func checkParams(ctx huma.Context, next func(huma.Context)) {
	u := ctx.URL()
	if cleanText(u.Path) && (!strings.Contains(u.RawQuery, "%") && cleanText(u.RawQuery)) && !hasEmptyValue(u.RawQuery) {
		next(ctx)
		return
	}
	var query url.Values
	c := checker{}
	for _, p := range ctx.Operation().Parameters {
		switch p.In {
		case "path":
			if msg := paramProblem(ctx.Param(p.Name)); msg != "" {
				c[p.Name] = msg
			}
		case "query":
			if query == nil {
				query = u.Query()
			}
			for _, v := range query[p.Name] {
				if msg := paramProblem(v); msg != "" {
					c["query."+p.Name] = msg
				} else if msg := emptyParamProblem(p.Schema, v); msg != "" {
					c["query."+p.Name] = msg
				}
			}
		}
	}
	if len(c) == 0 {
		next(ctx)
		return
	}
	ctx.SetHeader("Content-Type", "application/json")
	ctx.SetStatus(http.StatusBadRequest)
	_ = json.NewEncoder(ctx.BodyWriter()).Encode(validationFailed(c))
}

// hasEmptyValue reports whether a raw query gives some parameter an empty value (`per_page=`,
// or a bare `per_page`), without allocating: most queries have none.
func hasEmptyValue(rawQuery string) bool {
	for rest := rawQuery; rest != ""; {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		if pair != "" && (!strings.Contains(pair, "=") || strings.HasSuffix(pair, "=")) {
			return true
		}
	}
	return false
}

// emptyParamProblem words an empty value of a number or boolean query parameter as the hosted
// service does (`"query.per_page":"Input should be a valid integer, ... [input: ]"`); Huma takes
// an empty value for an absent one. Empty strings stay allowed: the CLI always sends `interval=`.
func emptyParamProblem(s *huma.Schema, v string) string {
	if v != "" || s == nil {
		return ""
	}
	switch s.Type {
	case huma.TypeInteger:
		return describeQueryDetail("invalid integer", v)
	case huma.TypeNumber:
		return describeQueryDetail("invalid float", v)
	case huma.TypeBoolean:
		return describeQueryDetail("invalid boolean", v)
	}
	return ""
}

// cleanText reports whether s is UTF-8 without a NUL.
func cleanText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

func paramProblem(v string) string {
	switch {
	case !utf8.ValidString(v):
		return fmt.Sprintf("%s [input: %s]", msgNotUnicode, echo(v))
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Sprintf("%s [input: %s]", msgNUL, echo(v))
	}
	return ""
}
