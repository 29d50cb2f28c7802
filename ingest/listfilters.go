package ingest

import (
	"fmt"
	"strings"

	"github.com/veritrail/veritrail/internal/store"
)

// The list filters of the Kosli CLI (CLIENT-2.md section 3), applied to an organization's
// whole list in memory: the lists they filter (environments, controls) are an organization's
// own and short, and each filter combines with the others (AND) with or without paging.

// quotedChoices words allowed values as the hosted service does: 'a', 'b' or 'c'.
func quotedChoices(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = "'" + v + "'"
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// checkChoice reports v under the query key when it is given and not one of allowed.
func checkChoice(c checker, key, v string, allowed []string) {
	if v == "" {
		return
	}
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	c["query."+key] = fmt.Sprintf("Input should be %s [input: %s]", quotedChoices(allowed), echo(v))
}

var sortDirections = []string{"asc", "desc"}

// tagsMatch is the tag filter: each entry is `key` (the key is present) or `key:value` (the
// key has that value), and all must hold.
func tagsMatch(tags map[string]string, filters []string) bool {
	for _, f := range filters {
		k, v, withValue := strings.Cut(f, ":")
		got, ok := tags[k]
		if !ok || (withValue && got != v) {
			return false
		}
	}
	return true
}

// window is the slice of n items page p shows (all of them when p.PerPage is 0).
func window(n int, p store.Page) (lo, hi int) {
	if p.PerPage <= 0 {
		return 0, n
	}
	lo = min((max(p.Page, 1)-1)*p.PerPage, n)
	return lo, min(lo+p.PerPage, n)
}
