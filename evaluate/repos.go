package evaluate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/veritrail/veritrail/internal/store"
)

// repoInfo is what a repo_info object says of its repository (CLIENT-2.md section 9).
type repoInfo struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	URL      string `json:"url"`
	Provider string `json:"provider"`
}

// repoOf reads the repository a repo_info names; ok is false when it names none. The CLI sends
// repo_info only with an id, a name and a URL, but other clients (and older data) give only a
// name, which names a repository too: artifacts are listed by it.
func repoOf(orgID string, raw json.RawMessage, at float64) (store.Repo, bool) {
	var ri repoInfo
	if len(raw) == 0 || json.Unmarshal(raw, &ri) != nil || ri.Name == "" {
		return store.Repo{}, false
	}
	return store.Repo{ID: repoID(orgID, ri.Provider, ri.ID, ri.Name), OrgID: orgID, Provider: ri.Provider, ExternalID: ri.ID,
		Name: ri.Name, URL: ri.URL, CreatedAt: at}, true
}

// repoID is a repo's inner id, derived from its identity so that a message applied twice, or
// by two evaluators, names the same repo; in the hosted service's form, lowercase hex grouped
// 8-4-4-4-8.
func repoID(orgID, provider, externalID, name string) string {
	h := sha256.Sum256([]byte(orgID + "\x00" + provider + "\x00" + externalID + "\x00" + name))
	x := hex.EncodeToString(h[:14])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:28]
}

// ensureRepo records the repository of a repo_info, if it names one.
func ensureRepo(ctx context.Context, tx store.Tx, orgID string, raw json.RawMessage, at float64) error {
	if r, ok := repoOf(orgID, raw, at); ok {
		return tx.EnsureRepo(ctx, r)
	}
	return nil
}

// repoInfoOf is the repo_info of a JSON document (an attestation's data, an artifact's report),
// read only when the document mentions one: attestations are the hot path.
func repoInfoOf(doc json.RawMessage) json.RawMessage {
	if !bytes.Contains(doc, []byte(`"repo_info"`)) {
		return nil
	}
	var d struct {
		RepoInfo json.RawMessage `json:"repo_info"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return nil
	}
	return d.RepoInfo
}
