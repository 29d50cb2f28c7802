package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/veritrail/veritrail/internal/store"
)

// reads implements store.Reader on any querier, so a transaction reads its own writes.
type reads struct {
	d dialect
	q querier
	// counts, when set, answers the totals of trail lists (the read pool; see trailCounts).
	counts *trailCounts
	// pages, when set, finds where deep pages of a flow's trails start (the read pool; see
	// trailPages).
	pages *trailPages
}

func (r reads) row(ctx context.Context, q string, args ...any) rowScanner {
	return r.q.queryRow(ctx, r.d.rebind(q), args...)
}

func (r reads) rows(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return r.q.QueryContext(ctx, r.d.rebind(q), args...)
}

func (r reads) count(ctx context.Context, what, q string, args ...any) (int, error) {
	var n int
	if err := r.row(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlstore: count %s: %w", what, err)
	}
	return n, nil
}

// --- identities

const orgCols = `id, name, public, created_at`

func scanOrg(sc interface{ Scan(...any) error }) (store.Org, error) {
	var o store.Org
	var pub int
	err := sc.Scan(&o.ID, &o.Name, &pub, &o.CreatedAt)
	o.Public = pub != 0
	return o, err
}

func (r reads) OrgByName(ctx context.Context, name string) (store.Org, error) {
	o, err := scanOrg(r.row(ctx, `SELECT `+orgCols+` FROM orgs WHERE name = ?`, name))
	if err != nil {
		return o, notFound(err, "org "+name)
	}
	return o, nil
}

func (r reads) OrgByID(ctx context.Context, id string) (store.Org, error) {
	o, err := scanOrg(r.row(ctx, `SELECT `+orgCols+` FROM orgs WHERE id = ?`, id))
	if err != nil {
		return o, notFound(err, "org "+id)
	}
	return o, nil
}

func (r reads) UserByID(ctx context.Context, id string) (store.User, error) {
	var u store.User
	err := r.row(ctx, `SELECT id, name, display_name, created_at, COALESCE(default_org_id, '') FROM users WHERE id = ?`, id).
		Scan(&u.ID, &u.Name, &u.DisplayName, &u.CreatedAt, &u.DefaultOrgID)
	if err != nil {
		return u, notFound(err, "user "+id)
	}
	return u, nil
}

func (r reads) UserByName(ctx context.Context, name string) (store.User, error) {
	var u store.User
	err := r.row(ctx, `SELECT id, name, display_name, created_at, COALESCE(default_org_id, '') FROM users WHERE name = ?`, name).
		Scan(&u.ID, &u.Name, &u.DisplayName, &u.CreatedAt, &u.DefaultOrgID)
	if err != nil {
		return u, notFound(err, "user "+name)
	}
	return u, nil
}

func (r reads) MemberRole(ctx context.Context, userID, orgID string) (store.Role, error) {
	var role string
	if err := r.row(ctx, `SELECT role FROM memberships WHERE user_id = ? AND org_id = ?`, userID, orgID).Scan(&role); err != nil {
		return "", notFound(err, "membership")
	}
	return store.Role(role), nil
}

func (r reads) UserOrgs(ctx context.Context, userID string) ([]store.Org, error) {
	rows, err := r.rows(ctx, `SELECT o.id, o.name, o.public, o.created_at FROM orgs o
		JOIN memberships m ON m.org_id = o.id WHERE m.user_id = ? ORDER BY o.name`, userID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: user orgs: %w", err)
	}
	defer rows.Close()
	var out []store.Org
	for rows.Next() {
		o, err := scanOrg(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: user orgs: %w", err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// --- flows

const flowCols = `f.id, f.org_id, f.name, f.description, f.visibility, f.template_id, COALESCE(t.content, ''), f.tags,
	f.repo_url, f.archived, f.created_at, f.last_modified_at`

const flowFrom = ` FROM flows f LEFT JOIN templates t ON t.id = f.template_id `

func scanFlow(sc interface{ Scan(...any) error }) (store.Flow, error) {
	var f store.Flow
	var tags string
	var archived int
	err := sc.Scan(&f.ID, &f.OrgID, &f.Name, &f.Description, &f.Visibility, &f.TemplateID, &f.Template, &tags,
		&f.RepoURL, &archived, &f.CreatedAt, &f.LastModifiedAt)
	if err != nil {
		return f, err
	}
	f.Archived = archived != 0
	f.Tags = map[string]string{}
	if tags != "" {
		if err := json.Unmarshal([]byte(tags), &f.Tags); err != nil {
			return f, fmt.Errorf("flow tags: %w", err)
		}
	}
	return f, nil
}

func (r reads) FlowByName(ctx context.Context, orgID, name string) (store.Flow, error) {
	f, err := scanFlow(r.row(ctx, `SELECT `+flowCols+flowFrom+`WHERE f.org_id = ? AND f.name = ? AND f.archived = 0`, orgID, name))
	if err != nil {
		return f, notFound(err, "flow "+name)
	}
	return f, nil
}

func (r reads) FlowByID(ctx context.Context, orgID, id string) (store.Flow, error) {
	f, err := scanFlow(r.row(ctx, `SELECT `+flowCols+flowFrom+`WHERE f.org_id = ? AND f.id = ?`, orgID, id))
	if err != nil {
		return f, notFound(err, "flow "+id)
	}
	return f, nil
}

func (r reads) ListFlows(ctx context.Context, orgID string, flt store.FlowFilter) ([]store.Flow, int, error) {
	where := `WHERE f.org_id = ? AND f.archived = 0`
	args := []any{orgID}
	if flt.NameContains != "" {
		if flt.CaseSensitive {
			where += ` AND f.name LIKE ? ESCAPE '!'`
			if r.d.name == "sqlite" {
				// SQLite's LIKE ignores ASCII case; GLOB does not.
				where = strings.Replace(where, "f.name LIKE ? ESCAPE '!'", "f.name GLOB ?", 1)
				args = append(args, "*"+globEscape(flt.NameContains)+"*")
			} else {
				args = append(args, "%"+likeEscape(flt.NameContains)+"%")
			}
		} else {
			where += ` AND LOWER(f.name) LIKE ? ESCAPE '!'`
			args = append(args, "%"+likeEscape(strings.ToLower(flt.NameContains))+"%")
		}
	}
	total, err := r.count(ctx, "flows", `SELECT COUNT(*) FROM flows f `+where, args...)
	if err != nil {
		return nil, 0, err
	}
	rows, err := r.rows(ctx, `SELECT `+flowCols+flowFrom+where+` ORDER BY f.name`+pageClause(flt.Page), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlstore: list flows: %w", err)
	}
	defer rows.Close()
	var out []store.Flow
	for rows.Next() {
		f, err := scanFlow(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("sqlstore: list flows: %w", err)
		}
		out = append(out, f)
	}
	return out, total, rows.Err()
}

// likeEscape quotes LIKE wildcards with the escape character '!' so that they match literally
// (names such as "my_flow" are common).
func likeEscape(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}

// globEscape quotes GLOB wildcards in brackets so that they match literally.
func globEscape(s string) string {
	return strings.NewReplacer("*", "[*]", "?", "[?]", "[", "[[]").Replace(s)
}

func (r reads) Template(ctx context.Context, id string) (string, error) {
	var c string
	if err := r.row(ctx, `SELECT content FROM templates WHERE id = ?`, id).Scan(&c); err != nil {
		return "", notFound(err, "template "+id)
	}
	return c, nil
}

// --- trails

const trailCols = `id, org_id, flow_id, name, doc, template_id, created_by, created_at, last_modified_at, state, compliance, evaluated_at`

// trailDoc holds the trail fields that are only ever read whole.
type trailDoc struct {
	Description   *string         `json:"description,omitempty"`
	GitCommitInfo json.RawMessage `json:"git_commit_info,omitempty"`
	RepoInfo      json.RawMessage `json:"repo_info,omitempty"`
	OriginURL     *string         `json:"origin_url,omitempty"`
	ExternalURLs  json.RawMessage `json:"external_urls,omitempty"`
	UserData      json.RawMessage `json:"user_data,omitempty"`
}

func scanTrail(sc interface{ Scan(...any) error }) (store.Trail, error) {
	var t store.Trail
	var doc, compliance string
	err := sc.Scan(&t.ID, &t.OrgID, &t.FlowID, &t.Name, &doc, &t.TemplateID, &t.CreatedBy, &t.CreatedAt,
		&t.LastModifiedAt, &t.State, &compliance, &t.EvaluatedAt)
	if err != nil {
		return t, err
	}
	var d trailDoc
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return t, fmt.Errorf("trail doc: %w", err)
	}
	t.Description, t.GitCommitInfo, t.RepoInfo = d.Description, d.GitCommitInfo, d.RepoInfo
	t.OriginURL, t.ExternalURLs, t.UserData = d.OriginURL, d.ExternalURLs, d.UserData
	if compliance != "" {
		t.Compliance = json.RawMessage(compliance)
	}
	return t, nil
}

func (r reads) TrailRef(ctx context.Context, orgID, flowName, trailName string) (store.TrailRef, error) {
	ref := store.TrailRef{FlowName: flowName, TrailName: trailName}
	var trailID sql.NullString
	err := r.row(ctx, `SELECT f.id, t.id FROM flows f LEFT JOIN trails t ON t.flow_id = f.id AND t.name = ?
		WHERE f.org_id = ? AND f.name = ? AND f.archived = 0`, trailName, orgID, flowName).Scan(&ref.FlowID, &trailID)
	if err != nil {
		return ref, notFound(err, "flow "+flowName)
	}
	ref.TrailID = trailID.String
	return ref, nil
}

func (r reads) TrailID(ctx context.Context, flowID, name string) (string, error) {
	var id string
	if err := r.row(ctx, `SELECT id FROM trails WHERE flow_id = ? AND name = ?`, flowID, name).Scan(&id); err != nil {
		return "", notFound(err, "trail "+name)
	}
	return id, nil
}

// trailsNamed selects the ID and name of a flow's trails of n names (parameters: the names,
// then the flow). PostgreSQL planned name IN (...) without statistics of trails (a new
// deployment's first minute) as a scan of the flow's trail index, filtering every trail of the
// flow by name: with 1,000 trails in a flow, 3-6 ms a batch of the evaluator's, its costliest
// read. A lookup a name, each an equality on the (flow_id, name) key, cannot be planned so.
func (d dialect) trailsNamed(n int) string {
	if d.name == postgresDialect.name {
		return `SELECT t.id, t.name FROM (VALUES ` + typedRows(n, "?") + `) AS w
			CROSS JOIN LATERAL (SELECT id, name FROM trails WHERE flow_id = ? AND name = w.column1 OFFSET 0) t`
	}
	return `SELECT id, name FROM trails WHERE name IN (` + placeholders(n) + `) AND flow_id = ?`
}

func (r reads) TrailIDs(ctx context.Context, keys []store.TrailKey) (map[store.TrailKey]string, error) {
	byFlow := map[string][]string{}
	for _, k := range keys {
		if !slices.Contains(byFlow[k.FlowID], k.Name) {
			byFlow[k.FlowID] = append(byFlow[k.FlowID], k.Name)
		}
	}
	out := make(map[store.TrailKey]string, len(keys))
	for _, flowID := range slices.Sorted(maps.Keys(byFlow)) {
		err := preparedChunks(byFlow[flowID], 1, func(names []string) error {
			rows, err := r.rows(ctx, oneOffIf(len(names) > preparedRows)+r.d.trailsNamed(len(names)), append(anys(names), flowID)...)
			if err != nil {
				return fmt.Errorf("sqlstore: trail ids: %w", err)
			}
			defer rows.Close()
			for rows.Next() {
				var id, name string
				if err := rows.Scan(&id, &name); err != nil {
					return fmt.Errorf("sqlstore: trail ids: %w", err)
				}
				out[store.TrailKey{FlowID: flowID, Name: name}] = id
			}
			return rows.Err()
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r reads) TrailToEvaluate(ctx context.Context, id string) (int64, string, error) {
	starts, err := r.TrailsToEvaluate(ctx, []string{id})
	if err != nil {
		return 0, "", err
	}
	st, ok := starts[id]
	if !ok {
		return 0, "", fmt.Errorf("sqlstore: trail %s: %w", id, store.ErrNotFound)
	}
	return st.Generation, st.TemplateID, nil
}

func (r reads) TrailsToEvaluate(ctx context.Context, ids []string) (map[string]store.EvaluationStart, error) {
	out := make(map[string]store.EvaluationStart, len(ids))
	err := preparedChunks(slices.Compact(slices.Sorted(slices.Values(ids))), 1, func(part []string) error {
		rows, err := r.rows(ctx, oneOffIf(len(part) > preparedRows)+`SELECT t.id, d.generation, t.template_id FROM trails t
			LEFT JOIN dirty_trails d ON d.trail_id = t.id WHERE t.id IN (`+placeholders(len(part))+`)`, anys(part)...)
		if err != nil {
			return fmt.Errorf("sqlstore: trails to evaluate: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var gen sql.NullInt64
			var s store.EvaluationStart
			if err := rows.Scan(&id, &gen, &s.TemplateID); err != nil {
				return fmt.Errorf("sqlstore: trails to evaluate: %w", err)
			}
			s.Generation = gen.Int64
			out[id] = s
		}
		return rows.Err()
	})
	return out, err
}

func (r reads) TrailByName(ctx context.Context, flowID, name string) (store.Trail, error) {
	t, err := scanTrail(r.row(ctx, `SELECT `+trailCols+` FROM trails WHERE flow_id = ? AND name = ?`, flowID, name))
	if err != nil {
		return t, notFound(err, "trail "+name)
	}
	return t, nil
}

func (r reads) TrailByID(ctx context.Context, id string) (store.Trail, error) {
	t, err := scanTrail(r.row(ctx, `SELECT `+trailCols+` FROM trails WHERE id = ?`, id))
	if err != nil {
		return t, notFound(err, "trail "+id)
	}
	return t, nil
}

func (r reads) ListTrails(ctx context.Context, orgID string, f store.TrailFilter) ([]store.Trail, int, error) {
	where := `WHERE org_id = ?`
	args := []any{orgID}
	if f.FlowIDs != nil {
		where += ` AND flow_id IN (` + placeholders(len(f.FlowIDs)) + `)`
		for _, id := range f.FlowIDs {
			args = append(args, id)
		}
	}
	if f.Fingerprint != "" {
		where += ` AND id IN (SELECT trail_id FROM artifacts WHERE org_id = ? AND fingerprint = ?)`
		args = append(args, orgID, f.Fingerprint)
	}
	deep := f.FlowIDs != nil && f.Fingerprint == "" && f.Page.Page > 1 && f.Page.PerPage > 0
	// One flow's deep page starts walking at the nearest anchor before it (trailPages), which
	// also tells the flow's total.
	var place pagePlace
	anchored := false
	var err error
	if deep && r.pages != nil && len(f.FlowIDs) == 1 && f.FlowIDs[0] != "" {
		if place, anchored, err = r.pages.seek(ctx, r, orgID, f.FlowIDs[0], (f.Page.Page-1)*f.Page.PerPage); err != nil {
			return nil, 0, err
		}
	}
	total := 0
	switch {
	case f.NoTotal:
	case anchored:
		total = place.total
	case r.counts != nil && f.Fingerprint == "" && (f.FlowIDs == nil || len(f.FlowIDs) == 1 && f.FlowIDs[0] != ""):
		flow := ""
		if f.FlowIDs != nil {
			flow = f.FlowIDs[0]
		}
		total, err = r.counts.count(ctx, r, orgID, flow)
	default:
		total, err = r.count(ctx, "trails", oneOffIf(f.FlowIDs != nil)+`SELECT COUNT(*) FROM trails `+where, args...)
	}
	if err != nil {
		return nil, 0, err
	}
	q := `SELECT ` + trailCols + ` FROM trails ` + where + ` ORDER BY created_at DESC, id` + pageClause(f.Page)
	if deep {
		// A deep page of flows' trails: the rows skipped are walked in trails_flow alone (it holds
		// every column the subquery reads), and only the page's rows are read from the table.
		page := `SELECT id FROM trails ` + where + ` ORDER BY created_at DESC, id` + pageClause(f.Page)
		if anchored {
			// One statement per page size for every anchored page (kept prepared, at most 100):
			// planning it was half of the page's time on PostgreSQL, which plans a statement
			// whose LIMIT is a parameter afresh at every call (it takes a generic plan to read a
			// tenth of the rows), and one whose LIMIT is written in once for all.
			page = `SELECT id FROM trails ` + where + ` AND created_at <= ? AND (created_at < ? OR id >= ?)
				ORDER BY created_at DESC, id LIMIT ` + strconv.Itoa(f.Page.PerPage) + ` OFFSET ?`
			args = append(args, place.from.createdAt, place.from.createdAt, place.from.id, place.skip)
		}
		q = `SELECT ` + trailCols + ` FROM trails WHERE id IN (` + page + `) ORDER BY created_at DESC, id`
	}
	rows, err := r.rows(ctx, oneOffIf(f.FlowIDs != nil && !anchored)+q, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlstore: list trails: %w", err)
	}
	defer rows.Close()
	var out []store.Trail
	for rows.Next() {
		t, err := scanTrail(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("sqlstore: list trails: %w", err)
		}
		out = append(out, t)
	}
	return out, total, rows.Err()
}

// --- artifacts

const artifactCols = `id, org_id, flow_id, trail_id, fingerprint, template_name, filename, git_commit, repo_name, report,
	reported_by, created_at, state`

func scanArtifact(sc interface{ Scan(...any) error }) (store.Artifact, error) {
	var a store.Artifact
	var report string
	err := sc.Scan(&a.ID, &a.OrgID, &a.FlowID, &a.TrailID, &a.Fingerprint, &a.TemplateName, &a.Filename, &a.GitCommit,
		&a.RepoName, &report, &a.ReportedBy, &a.CreatedAt, &a.State)
	a.Report = json.RawMessage(report)
	return a, err
}

func (r reads) artifacts(ctx context.Context, what, q string, args ...any) ([]store.Artifact, error) {
	rows, err := r.rows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	defer rows.Close()
	var out []store.Artifact
	for rows.Next() {
		a, err := scanArtifact(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func (r reads) TrailArtifacts(ctx context.Context, trailID string) ([]store.Artifact, error) {
	return r.artifacts(ctx, "trail artifacts", `SELECT `+artifactCols+` FROM artifacts WHERE trail_id = ? ORDER BY seq`, trailID)
}

func (r reads) TrailArtifactsByIDs(ctx context.Context, trailIDs []string) (map[string][]store.Artifact, error) {
	out := make(map[string][]store.Artifact, len(trailIDs))
	err := preparedChunks(slices.Compact(slices.Sorted(slices.Values(trailIDs))), 1, func(part []string) error {
		arts, err := r.artifacts(ctx, "trail artifacts", oneOffIf(len(part) > preparedRows)+`SELECT `+artifactCols+
			` FROM artifacts WHERE trail_id IN (`+placeholders(len(part))+`) ORDER BY seq`, anys(part)...)
		for _, a := range arts {
			out[a.TrailID] = append(out[a.TrailID], a)
		}
		return err
	})
	return out, err
}

// ArtifactsByPrefix finds artifacts whose fingerprint starts with prefix (callers validate it
// as lowercase hex, so it holds no LIKE wildcards); flowID "" searches the whole organization.
func (r reads) ArtifactsByPrefix(ctx context.Context, orgID, flowID, prefix string, limit int) ([]store.Artifact, error) {
	q := `SELECT ` + artifactCols + ` FROM artifacts WHERE org_id = ? AND fingerprint >= ? AND fingerprint < ?`
	args := []any{orgID, prefix, prefix + "g"} // 'g' sorts after every hex digit: a range scan on the index
	if flowID != "" {
		q += ` AND flow_id = ?`
		args = append(args, flowID)
	}
	q += fmt.Sprintf(` ORDER BY seq DESC LIMIT %d`, max(limit, 1))
	return r.artifacts(ctx, "artifacts by prefix", q, args...)
}

func (r reads) ArtifactsByCommit(ctx context.Context, orgID, flowID, sha string) ([]store.Artifact, error) {
	q := `SELECT ` + artifactCols + ` FROM artifacts WHERE org_id = ? AND git_commit = ?`
	args := []any{orgID, sha}
	if flowID != "" {
		q += ` AND flow_id = ?`
		args = append(args, flowID)
	}
	return r.artifacts(ctx, "artifacts by commit", q+` ORDER BY seq DESC`, args...)
}

func (r reads) ListArtifacts(ctx context.Context, orgID string, f store.ArtifactFilter) ([]store.Artifact, int, error) {
	where := ` WHERE org_id = ?`
	args := []any{orgID}
	if f.FlowID != "" {
		where += ` AND flow_id = ?`
		args = append(args, f.FlowID)
	}
	if f.RepoName != "" {
		where += ` AND repo_name = ?`
		args = append(args, f.RepoName)
	}
	total, err := r.count(ctx, "artifacts", `SELECT COUNT(*) FROM artifacts`+where, args...)
	if err != nil {
		return nil, 0, err
	}
	out, err := r.artifacts(ctx, "list artifacts", `SELECT `+artifactCols+` FROM artifacts`+where+` ORDER BY seq DESC`+pageClause(f.Page), args...)
	return out, total, err
}

// --- attestations

const attestationCols = `id, org_id, flow_id, trail_id, name, type, is_compliant, artifact_fingerprint, target_artifact,
	overrides_id, override_reason, evidence_sha256, evidence_name, data, reported_by, created_at`

func scanAttestation(sc interface{ Scan(...any) error }) (store.Attestation, error) {
	var a store.Attestation
	var compliant int
	var data string
	err := sc.Scan(&a.ID, &a.OrgID, &a.FlowID, &a.TrailID, &a.Name, &a.Type, &compliant, &a.ArtifactFingerprint,
		&a.TargetArtifact, &a.OverridesID, &a.OverrideReason, &a.EvidenceSHA256, &a.EvidenceName, &data, &a.ReportedBy, &a.CreatedAt)
	a.IsCompliant = compliant != 0
	a.Data = json.RawMessage(data)
	return a, err
}

func (r reads) attestations(ctx context.Context, what, q string, args ...any) ([]store.Attestation, error) {
	rows, err := r.rows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	defer rows.Close()
	var out []store.Attestation
	for rows.Next() {
		a, err := scanAttestation(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func (r reads) TrailAttestations(ctx context.Context, trailID string) ([]store.Attestation, error) {
	return r.attestations(ctx, "trail attestations", `SELECT `+attestationCols+` FROM attestations WHERE trail_id = ? ORDER BY seq`, trailID)
}

func (r reads) TrailAttestationFacts(ctx context.Context, trailID string) ([]store.AttestationFact, error) {
	facts, err := r.TrailAttestationFactsByIDs(ctx, []string{trailID})
	return facts[trailID], err
}

func (r reads) AttestationByID(ctx context.Context, orgID, id string) (store.Attestation, error) {
	a, err := scanAttestation(r.row(ctx, `SELECT `+attestationCols+` FROM attestations WHERE org_id = ? AND id = ?`, orgID, id))
	if err != nil {
		return a, notFound(err, "attestation "+id)
	}
	return a, nil
}

func (r reads) ListAttestations(ctx context.Context, orgID string, p store.Page) ([]store.Attestation, int, error) {
	total, err := r.count(ctx, "attestations", `SELECT COUNT(*) FROM attestations WHERE org_id = ?`, orgID)
	if err != nil {
		return nil, 0, err
	}
	out, err := r.attestations(ctx, "list attestations",
		`SELECT `+attestationCols+` FROM attestations WHERE org_id = ? ORDER BY seq DESC`+pageClause(p), orgID)
	return out, total, err
}

// --- custom types

func (r reads) CustomType(ctx context.Context, orgID, name string) (store.CustomType, error) {
	ct := store.CustomType{OrgID: orgID, Name: name}
	var archived int
	err := r.row(ctx, `SELECT description, archived FROM custom_types WHERE org_id = ? AND name = ?`, orgID, name).
		Scan(&ct.Description, &archived)
	if err != nil {
		return ct, notFound(err, "custom type "+name)
	}
	ct.Archived = archived != 0
	ct.Versions, err = r.customTypeVersions(ctx, orgID, name)
	return ct, err
}

func (r reads) customTypeVersions(ctx context.Context, orgID, name string) ([]store.CustomTypeVersion, error) {
	rows, err := r.rows(ctx, `SELECT version, schema_json, rules, summary, created_by, created_at FROM custom_type_versions
		WHERE org_id = ? AND name = ? ORDER BY version`, orgID, name)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: custom type versions: %w", err)
	}
	defer rows.Close()
	var out []store.CustomTypeVersion
	for rows.Next() {
		var v store.CustomTypeVersion
		var rules string
		var summary sql.NullString
		if err := rows.Scan(&v.Version, &v.Schema, &rules, &summary, &v.CreatedBy, &v.CreatedAt); err != nil {
			return nil, fmt.Errorf("sqlstore: custom type versions: %w", err)
		}
		if err := json.Unmarshal([]byte(rules), &v.Rules); err != nil {
			return nil, fmt.Errorf("sqlstore: custom type rules: %w", err)
		}
		if summary.Valid {
			if err := json.Unmarshal([]byte(summary.String), &v.Summary); err != nil {
				return nil, fmt.Errorf("sqlstore: custom type summary: %w", err)
			}
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (r reads) ListCustomTypes(ctx context.Context, orgID string) ([]store.CustomType, error) {
	rows, err := r.rows(ctx, `SELECT name FROM custom_types WHERE org_id = ? AND archived = 0 ORDER BY name`, orgID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list custom types: %w", err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlstore: list custom types: %w", err)
		}
		names = append(names, n)
	}
	rows.Close()
	out := make([]store.CustomType, 0, len(names))
	for _, n := range names {
		ct, err := r.CustomType(ctx, orgID, n)
		if err != nil {
			return nil, err
		}
		out = append(out, ct)
	}
	return out, nil
}

// --- read your writes

func (r reads) DirtyGeneration(ctx context.Context, trailID string) (int64, error) {
	var g int64
	err := r.row(ctx, `SELECT generation FROM dirty_trails WHERE trail_id = ?`, trailID).Scan(&g)
	if err != nil {
		err = notFound(err, "dirty trail "+trailID)
		if errors.Is(err, store.ErrNotFound) {
			return 0, nil
		}
		return 0, err
	}
	return g, nil
}

// visibleAmong counts which of n message IDs are visible (Visible). On PostgreSQL a lookup an
// ID, as trailsNamed: without statistics of applied_messages, which grows with every message, the
// IN list was planned as a scan of the whole table at every read-after-write check.
func (d dialect) visibleAmong(n int) string {
	const unevaluated = `NOT EXISTS (SELECT 1 FROM dirty_trails d WHERE d.trail_id = a.trail_id
			AND (a.generation = 0 OR d.evaluated < a.generation))`
	if d.name == postgresDialect.name {
		return `SELECT COUNT(*) FROM (VALUES ` + typedRows(n, "?") + `) AS w
			CROSS JOIN LATERAL (SELECT a.trail_id, a.generation FROM applied_messages a WHERE a.id = w.column1 OFFSET 0) a
			WHERE ` + unevaluated
	}
	return `SELECT COUNT(*) FROM applied_messages a WHERE a.id IN (` + placeholders(n) + `) AND ` + unevaluated
}

func (r reads) Visible(ctx context.Context, ids []string) (bool, error) {
	if len(ids) == 0 {
		return true, nil
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids))) // counted against distinct rows below
	// A message is visible once an evaluation of its trail at the generation it left (or a later
	// one) is saved: the trail is clean, or was evaluated up to it and dirtied again since. A
	// message marked without a generation waits for its trail to be clean.
	visible := true
	err := cut(r.d, ids, 1, func(part []string, prepared bool) error {
		if !visible {
			return nil
		}
		n, err := r.count(ctx, "visible", oneOffIf(!prepared)+r.d.visibleAmong(len(part)), anys(part)...)
		visible = n == len(part)
		return err
	})
	return visible && err == nil, err
}

func (r reads) PendingEvaluations(ctx context.Context, orgID string) ([]store.DirtyTrail, error) {
	q, args := `SELECT d.trail_id, t.org_id, d.generation FROM dirty_trails d JOIN trails t ON t.id = d.trail_id`, []any(nil)
	if orgID != "" {
		q, args = q+` WHERE t.org_id = ?`, []any{orgID}
	}
	rows, err := r.rows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: pending evaluations: %w", err)
	}
	defer rows.Close()
	var out []store.DirtyTrail
	for rows.Next() {
		var d store.DirtyTrail
		if err := rows.Scan(&d.TrailID, &d.OrgID, &d.Generation); err != nil {
			return nil, fmt.Errorf("sqlstore: pending evaluations: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: pending evaluations: %w", err)
	}
	return out, nil
}

func (r reads) Evaluated(ctx context.Context, generations map[string]int64) (bool, error) {
	behind := false
	err := cut(r.d, slices.Sorted(maps.Keys(generations)), 1, func(part []string, prepared bool) error {
		if behind {
			return nil
		}
		// A trail without a row is clean: evaluated since. One whose row was made again after it
		// was clean counts the generations before the new one as evaluated (MarkDirtyAll).
		rows, err := r.rows(ctx, oneOffIf(!prepared)+`SELECT trail_id, evaluated FROM dirty_trails WHERE trail_id IN (`+
			placeholders(len(part))+`)`, anys(part)...)
		if err != nil {
			return fmt.Errorf("sqlstore: evaluated: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var evaluated int64
			if err := rows.Scan(&id, &evaluated); err != nil {
				return fmt.Errorf("sqlstore: evaluated: %w", err)
			}
			behind = behind || evaluated < generations[id]
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlstore: evaluated: %w", err)
		}
		return nil
	})
	return !behind && err == nil, err
}
