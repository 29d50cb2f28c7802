package web

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/veritrail/veritrail/internal/store"
)

// searchPattern is what a search may be: the start of a fingerprint or a git commit.
var searchPattern = regexp.MustCompile(`^[0-9a-f]{4,64}$`)

// searchLimit bounds the artifacts a search shows.
const searchLimit = 100

type searchHit struct {
	Artifact store.Artifact
	Flow     string
}

type searchData struct {
	Query   string
	Problem string
	Hits    []searchHit
}

// searchPage finds the artifacts whose fingerprint or git commit starts with the query, as the
// API's search does (and like it, it needs a key of the organization).
func (s *Site) searchPage(c *call) (string, string, any, error) {
	q := strings.ToLower(strings.TrimSpace(c.r.URL.Query().Get("q")))
	d := searchData{Query: q}
	if q == "" {
		return "search", "Search", d, nil
	}
	if !searchPattern.MatchString(q) {
		d.Problem = "Search for 4 to 64 hexadecimal characters: the start of a fingerprint or of a git commit."
		return "search", "Search", d, nil
	}
	arts, err := s.store.SearchArtifacts(c.ctx(), c.p.Org.ID, q, searchLimit)
	if err != nil {
		return "", "", nil, fmt.Errorf("search artifacts: %w", err)
	}
	flows := map[string]string{}
	for _, a := range arts {
		name, ok := flows[a.FlowID]
		if !ok {
			f, err := s.store.FlowByID(c.ctx(), c.p.Org.ID, a.FlowID)
			if errors.Is(err, store.ErrNotFound) {
				continue // archived since
			}
			if err != nil {
				return "", "", nil, fmt.Errorf("look up flow: %w", err)
			}
			name = f.Name
			flows[a.FlowID] = name
		}
		d.Hits = append(d.Hits, searchHit{Artifact: a, Flow: name})
	}
	return "search", "Search " + q, d, nil
}
