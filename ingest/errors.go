package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"
)

// Error is every error body the API writes: {"message": ..., "errors": {field: text}}, the shape
// the Kosli CLI prints. errors is there only for validation failures: the CLI prints the value
// of a present "errors" key, so an "errors": null would end every message with ": <nil>".
type Error struct {
	Status  int               `json:"-"`
	Message string            `json:"message"`
	Errors  map[string]string `json:"errors,omitempty"`
	// RetryAfter is the Retry-After header in seconds. A 429 or a 503 always carries one (1 when
	// left at 0): the CLI waits that long before it retries, and without it retries at once.
	RetryAfter int `json:"-"`
}

func (e *Error) Error() string  { return e.Message }
func (e *Error) GetStatus() int { return e.Status }

// GetHeaders gives Huma the Retry-After header of an error a handler returns (huma.HeadersError).
func (e *Error) GetHeaders() http.Header {
	if s := e.retryAfter(); s > 0 {
		return http.Header{"Retry-After": {strconv.Itoa(s)}}
	}
	return nil
}

func (e *Error) retryAfter() int {
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		return max(e.RetryAfter, 1)
	}
	return e.RetryAfter
}

func apiError(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// retryUnavailable is the Retry-After, in seconds, of a 503 for a dependency that failed (the
// bus, the attachment store) rather than for load: long enough for a broker to elect a leader
// or a database to come back, short enough for the CLI's three retries to span an outage of
// that kind.
const retryUnavailable = 5

// unavailable is a 503 for a dependency that failed.
func unavailable(format string, args ...any) *Error {
	e := apiError(http.StatusServiceUnavailable, format, args...)
	e.RetryAfter = retryUnavailable
	return e
}

// validationFailed is the 400 the hosted service answers for bad fields.
func validationFailed(fields map[string]string) *Error {
	return &Error{Status: http.StatusBadRequest, Message: "Input payload validation failed", Errors: fields}
}

func fieldError(field, format string, args ...any) *Error {
	return validationFailed(map[string]string{field: fmt.Sprintf(format, args...)})
}

// patternError words a pattern mismatch as the hosted service does.
func patternError(pattern string, value any) string {
	if s, ok := value.(string); ok {
		value = echo(s)
	}
	return fmt.Sprintf("String should match pattern '%s' [input: %v]", pattern, value)
}

var installErrorsOnce sync.Once

// installErrorModel routes Huma's own errors (validation, parsing, body size) into Error.
// huma.NewError is Huma's one process-wide hook for this; setting it again is harmless
// because every API in the process wants the same body.
func installErrorModel() {
	installErrorsOnce.Do(func() {
		huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
			fields := map[string]string{}
			for _, err := range errs {
				if err == nil {
					continue
				}
				var d *huma.ErrorDetail
				if errors.As(err, &d) {
					field, text := describeDetail(d)
					if prev, ok := fields[field]; ok {
						text = prev + "; " + text
					}
					fields[field] = text
					continue
				}
				fields["body"] = err.Error()
			}
			if status == http.StatusRequestTimeout {
				// Huma's "request body read timeout": the body arrived slower than Limits allow.
				msg = "Request body read timeout: the body arrived too slowly"
			}
			if status == http.StatusUnsupportedMediaType {
				// Not a validation error: {"message"} alone, naming the content type sent.
				msg = "Unsupported media type"
				for _, text := range fields {
					if ct, ok := strings.CutPrefix(text, "unknown content type: "); ok {
						msg += " '" + ct + "': send application/json"
					}
				}
				fields = nil
			}
			if status == http.StatusUnprocessableEntity {
				status = http.StatusBadRequest
				msg = "Input payload validation failed"
			}
			if status == http.StatusBadRequest && len(fields) > 0 && strings.HasPrefix(msg, "validation failed") {
				msg = "Input payload validation failed"
			}
			if len(fields) == 0 {
				fields = nil
			}
			return &Error{Status: status, Message: msg, Errors: fields}
		}
	})
}

// describeDetail turns "body.fingerprint" + "expected string to match pattern X" into the
// field name and the hosted service's wording.
func describeDetail(d *huma.ErrorDetail) (string, string) {
	// Body fields go by their bare name, query parameters keep their "query." (CLIENT-2.md,
	// section 2): `query.per_page`, `query.type[0]`.
	field := d.Location
	for _, p := range []string{"body.", "path.", "header."} {
		field = strings.TrimPrefix(field, p)
	}
	if field == "" {
		field = "body"
	}
	msg := d.Message
	if strings.HasPrefix(field, "query.") {
		msg = describeQueryDetail(msg, d.Value)
	}
	if d.Location == "body" && msg == errBodyText.Error() {
		body, _ := d.Value.(string) // Huma gives the body as the value of a body it could not decode
		e := textError("body", []byte(body))
		for f, m := range e.Errors {
			return f, m
		}
	}
	if pat, ok := strings.CutPrefix(msg, "expected string to match pattern "); ok {
		msg = patternError(pat, d.Value)
	}
	var limit int
	if _, err := fmt.Sscanf(msg, "expected length <= %d", &limit); err == nil {
		s, _ := d.Value.(string)
		msg = fmt.Sprintf("String should have at most %d characters [input: %s]", limit, echo(s))
	}
	if list, ok := strings.CutPrefix(msg, "expected value to be one of "); ok {
		// An enum, in the hosted service's words: the allowed values and the input.
		choices := strings.Split(strings.Trim(list, `"`), ", ")
		v := d.Value
		if s, ok := v.(string); ok {
			v = echo(s)
		}
		msg = fmt.Sprintf("Input should be %s [input: %v]", quotedChoices(choices), v)
	}
	if kind, ok := typeWords[msg]; ok { // a value of the wrong JSON type, in pydantic's words
		v := fmt.Sprint(d.Value)
		if s, isString := d.Value.(string); isString {
			v = echo(s)
		} else if b, err := json.Marshal(d.Value); err == nil {
			v = echo(string(b))
		}
		msg = fmt.Sprintf("Input should be %s [input: %s]", kind, v)
	}
	if msg == "unexpected property" { // a property an object does not allow, in the hosted service's words
		msg = "Extra inputs are not permitted"
	}
	// A missing property is reported on the object that lacks it; name the property, as the
	// hosted service does.
	if prop, ok := strings.CutPrefix(msg, "expected required property "); ok {
		if prop, ok = strings.CutSuffix(prop, " to be present"); ok {
			if field == "body" {
				field = prop
			} else {
				field += "." + prop
			}
			msg = "Field required"
		}
	}
	return field, msg
}

// typeWords are Huma's type complaints and pydantic's names of the type expected.
var typeWords = map[string]string{
	"expected object":  "a valid dictionary",
	"expected array":   "a valid list",
	"expected string":  "a valid string",
	"expected boolean": "a valid boolean",
	"expected number":  "a valid number",
	"expected integer": "a valid integer",
}

// describeQueryDetail words Huma's complaint about a query parameter's value as the hosted
// service (pydantic) does, with the value the caller sent.
func describeQueryDetail(msg string, value any) string {
	input := value
	if s, ok := value.(string); ok {
		input = echo(s)
	}
	var bound string
	switch {
	case msg == "invalid integer":
		return fmt.Sprintf("Input should be a valid integer, unable to parse string as an integer [input: %v]", input)
	case msg == "invalid float":
		return fmt.Sprintf("Input should be a valid number, unable to parse string as a number [input: %v]", input)
	case msg == "invalid boolean":
		return fmt.Sprintf("Input should be a valid boolean, unable to interpret input [input: %v]", input)
	case scanBound(msg, "expected number >= ", &bound):
		return fmt.Sprintf("Input should be greater than or equal to %s [input: %v]", bound, input)
	case scanBound(msg, "expected number <= ", &bound):
		return fmt.Sprintf("Input should be less than or equal to %s [input: %v]", bound, input)
	case scanBound(msg, "expected number > ", &bound):
		return fmt.Sprintf("Input should be greater than %s [input: %v]", bound, input)
	case scanBound(msg, "expected number < ", &bound):
		return fmt.Sprintf("Input should be less than %s [input: %v]", bound, input)
	}
	return msg
}

func scanBound(msg, prefix string, bound *string) bool {
	b, ok := strings.CutPrefix(msg, prefix)
	*bound = b
	return ok
}

// fieldList renders a field map for logs and messages in a stable order.
func fieldList(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + m[k]
	}
	return strings.Join(parts, "; ")
}
