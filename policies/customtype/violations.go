package customtype

import (
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

// dataViolations flattens a validation error tree into one readable message
// per data location.
func dataViolations(ve *jsonschema.ValidationError, data any) map[string]string {
	msgs := map[string][]string{}
	collectData(ve, data, msgs)
	return joinMessages(msgs)
}

func collectData(e *jsonschema.ValidationError, data any, msgs map[string][]string) {
	path := dataPath(data, e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		// Key missing properties by their own path: that is the field the
		// client has to add.
		for _, p := range k.Missing {
			msgs[childPath(path, p)] = append(msgs[childPath(path, p)], "is required")
		}
		return
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			msgs[childPath(path, p)] = append(msgs[childPath(path, p)], "is not allowed by the schema")
		}
		return
	case *kind.FalseSchema:
		msgs[path] = append(msgs[path], "is not allowed by the schema")
		return
	case *kind.AnyOf:
		// Listing every failed alternative would suggest all of them must be
		// fixed; only one has to match.
		msgs[path] = append(msgs[path], "does not match any of the allowed schemas (anyOf)")
		return
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			msgs[path] = append(msgs[path], "does not match any of the allowed schemas (oneOf)")
		} else {
			msgs[path] = append(msgs[path], "matches more than one schema, but exactly one is allowed (oneOf)")
		}
		return
	}
	if len(e.Causes) == 0 {
		msgs[path] = append(msgs[path], e.ErrorKind.LocalizedString(printer))
		return
	}
	for _, c := range e.Causes {
		collectData(c, data, msgs)
	}
}

// dataPath turns a JSON pointer token list into "attestation_data.a[0].b",
// walking the data to tell array indexes from object keys.
func dataPath(data any, tokens []string) string {
	path := rootPath
	cur := data
	for _, tok := range tokens {
		switch c := cur.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err == nil && i >= 0 && i < len(c) {
				path, cur = indexPath(path, i), c[i]
				continue
			}
			path, cur = childPath(path, tok), nil
		case map[string]any:
			path, cur = childPath(path, tok), c[tok]
		default:
			path, cur = childPath(path, tok), nil
		}
	}
	return path
}

// metaschemaViolations lists every leaf of a schema-vs-metaschema failure with
// its JSON pointer into the schema. Unlike data errors, all anyOf branches are
// shown: the metaschema's alternatives (e.g. "type" as string or array) are
// exactly what the author needs to see.
func metaschemaViolations(ve *jsonschema.ValidationError) string {
	msgs := map[string][]string{}
	collectMeta(ve, msgs)
	joined := joinMessages(msgs)
	keys := make([]string, 0, len(joined))
	for k := range joined {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		where := "at the root"
		if k != "" {
			where = "at " + strconv.Quote(k)
		}
		parts[i] = where + ": " + joined[k]
	}
	return strings.Join(parts, "; ")
}

func collectMeta(e *jsonschema.ValidationError, msgs map[string][]string) {
	if len(e.Causes) == 0 {
		ptr := ""
		for _, t := range e.InstanceLocation {
			ptr += "/" + strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
		}
		msgs[ptr] = append(msgs[ptr], e.ErrorKind.LocalizedString(printer))
		return
	}
	for _, c := range e.Causes {
		collectMeta(c, msgs)
	}
}

// joinMessages dedupes and sorts per location so output is deterministic
// (the validator visits properties in map order).
func joinMessages(msgs map[string][]string) map[string]string {
	out := make(map[string]string, len(msgs))
	for k, list := range msgs {
		sort.Strings(list)
		uniq := list[:0]
		for i, m := range list {
			if i == 0 || m != list[i-1] {
				uniq = append(uniq, m)
			}
		}
		out[k] = strings.Join(uniq, "; ")
	}
	return out
}
