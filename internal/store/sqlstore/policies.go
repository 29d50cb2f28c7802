package sqlstore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/veritrail/veritrail/internal/store"
)

// policyStatements create the tables of environment policies. env_verdicts holds the current verdict per running
// artifact of an environment with policies; policy_evaluations the outcome once per (policy meaning, artifact
// input), keyed so that a verdict's input hash finds every policy's evaluation of it; rule_docs the rule
// evaluations themselves, once per distinct document (most artifacts that comply get the same one from a policy).
var policyStatements = []string{
	`CREATE TABLE IF NOT EXISTS policies (
		org_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL, created_by TEXT NOT NULL,
		created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (org_id, name))`,
	`CREATE TABLE IF NOT EXISTS policy_versions (
		org_id TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL, format TEXT NOT NULL, content TEXT NOT NULL,
		content_id TEXT NOT NULL, comment TEXT NOT NULL, created_by TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
		PRIMARY KEY (org_id, name, version))`,
	`CREATE TABLE IF NOT EXISTS env_policies (
		seq {{serial}}, env_id TEXT NOT NULL, org_id TEXT NOT NULL, policy_name TEXT NOT NULL,
		attached_at DOUBLE PRECISION NOT NULL, UNIQUE (env_id, policy_name))`,
	`CREATE INDEX IF NOT EXISTS env_policies_policy ON env_policies (org_id, policy_name)`,
	`CREATE TABLE IF NOT EXISTS policy_evaluations (
		org_id TEXT NOT NULL, input_hash TEXT NOT NULL, policy_id TEXT NOT NULL, compliant INTEGER NOT NULL,
		failed INTEGER NOT NULL, doc_id TEXT NOT NULL, PRIMARY KEY (org_id, input_hash, policy_id))`,
	`CREATE TABLE IF NOT EXISTS rule_docs (org_id TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (org_id, id))`,
	`CREATE TABLE IF NOT EXISTS snapshot_policies (
		env_id TEXT NOT NULL, idx INTEGER NOT NULL, policies TEXT NOT NULL, PRIMARY KEY (env_id, idx))`,
	`CREATE TABLE IF NOT EXISTS env_verdicts (
		env_id TEXT NOT NULL, fingerprint TEXT NOT NULL, name TEXT NOT NULL, org_id TEXT NOT NULL, input_hash TEXT NOT NULL,
		compliant INTEGER NOT NULL, allowlisted INTEGER NOT NULL, failed INTEGER NOT NULL, policies TEXT NOT NULL,
		evaluated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (env_id, fingerprint, name))`,
}

func (r reads) FingerprintReports(ctx context.Context, orgID string, fps []string) ([]store.FingerprintReport, error) {
	var out []store.FingerprintReport
	var seqs []int64 // of out, for the order: sorted here, which costs less than the statement sorting its rows
	err := cut(r.d, fps, 1, func(part []string, prepared bool) error {
		rows, err := r.rows(ctx, oneOffIf(!prepared)+`SELECT a.seq, a.id, a.org_id, a.flow_id, a.trail_id, a.fingerprint, a.template_name,
			a.filename, a.git_commit, a.repo_name, a.report, a.reported_by, a.created_at, a.state
			FROM artifacts a WHERE a.org_id = ? AND a.fingerprint IN (`+placeholders(len(part))+`)`,
			append([]any{orgID}, anys(part)...)...)
		if err != nil {
			return fmt.Errorf("sqlstore: fingerprint reports: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var x store.FingerprintReport
			a := &x.Artifact
			var report string
			var seq int64
			if err := rows.Scan(&seq, &a.ID, &a.OrgID, &a.FlowID, &a.TrailID, &a.Fingerprint, &a.TemplateName, &a.Filename, &a.GitCommit,
				&a.RepoName, &report, &a.ReportedBy, &a.CreatedAt, &a.State); err != nil {
				return fmt.Errorf("sqlstore: fingerprint reports: %w", err)
			}
			a.Report = json.RawMessage(report)
			out, seqs = append(out, x), append(seqs, seq)
		}
		return rows.Err()
	})
	if err != nil || len(out) == 0 {
		return out, err
	}
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return cmp.Compare(seqs[i], seqs[j]) })
	sorted := make([]store.FingerprintReport, len(out))
	for k, i := range order {
		sorted[k] = out[i]
	}
	out = sorted
	// The trails and flows of the reports, read once each rather than joined to every report: a snapshot's
	// artifacts come from a few of them, and a trail's row is long (its document and compliance come before the
	// columns read here).
	trails := map[string]store.Trail{}
	flows := map[string]store.Flow{}
	for _, x := range out {
		trails[x.Artifact.TrailID], flows[x.Artifact.FlowID] = store.Trail{}, store.Flow{}
	}
	err = cut(r.d, slices.Sorted(maps.Keys(trails)), 1, func(part []string, prepared bool) error {
		rows, err := r.rows(ctx, oneOffIf(!prepared)+`SELECT id, name, template_id, state, evaluated_at FROM trails
			WHERE id IN (`+placeholders(len(part))+`)`, anys(part)...)
		if err != nil {
			return fmt.Errorf("sqlstore: fingerprint reports' trails: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var t store.Trail
			if err := rows.Scan(&t.ID, &t.Name, &t.TemplateID, &t.State, &t.EvaluatedAt); err != nil {
				return fmt.Errorf("sqlstore: fingerprint reports' trails: %w", err)
			}
			t.OrgID = orgID
			trails[t.ID] = t
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	err = cut(r.d, slices.Sorted(maps.Keys(flows)), 1, func(part []string, prepared bool) error {
		rows, err := r.rows(ctx, oneOffIf(!prepared)+`SELECT id, name, tags FROM flows WHERE archived = 0 AND id IN (`+
			placeholders(len(part))+`)`, anys(part)...)
		if err != nil {
			return fmt.Errorf("sqlstore: fingerprint reports' flows: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			f := store.Flow{OrgID: orgID, Tags: map[string]string{}}
			var tags string
			if err := rows.Scan(&f.ID, &f.Name, &tags); err != nil {
				return fmt.Errorf("sqlstore: fingerprint reports' flows: %w", err)
			}
			if tags != "" {
				if err := json.Unmarshal([]byte(tags), &f.Tags); err != nil {
					return fmt.Errorf("sqlstore: flow tags: %w", err)
				}
			}
			flows[f.ID] = f
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, x := range out { // the reports of live flows (an archived flow's reports count for nothing)
		t, f := trails[x.Artifact.TrailID], flows[x.Artifact.FlowID]
		if t.ID == "" || f.ID == "" {
			continue
		}
		x.Trail, x.Flow = t, f
		x.Trail.FlowID = x.Artifact.FlowID
		kept = append(kept, x)
	}
	return kept, nil
}

const policyVersionCols = `version, format, content, content_id, comment, created_by, created_at`

func scanPolicyVersion(sc interface{ Scan(...any) error }, lead ...any) (store.PolicyVersion, error) {
	var v store.PolicyVersion
	err := sc.Scan(append(lead, &v.Version, &v.Format, &v.Content, &v.ContentID, &v.Comment, &v.CreatedBy, &v.CreatedAt)...)
	return v, err
}

func (r reads) Policy(ctx context.Context, orgID, name string) (store.Policy, error) {
	p := store.Policy{OrgID: orgID, Name: name}
	err := r.row(ctx, `SELECT description, created_by, created_at FROM policies WHERE org_id = ? AND name = ?`, orgID, name).
		Scan(&p.Description, &p.CreatedBy, &p.CreatedAt)
	if err != nil {
		return p, notFound(err, "policy "+name)
	}
	byName := map[string]*store.Policy{name: &p}
	err = r.policyVersions(ctx, byName, `SELECT name, `+policyVersionCols+` FROM policy_versions
		WHERE org_id = ? AND name = ? ORDER BY version`, orgID, name)
	return p, err
}

func (r reads) ListPolicies(ctx context.Context, orgID string) ([]store.Policy, error) {
	rows, err := r.rows(ctx, `SELECT name, description, created_by, created_at FROM policies WHERE org_id = ? ORDER BY name`, orgID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list policies: %w", err)
	}
	var out []store.Policy
	for rows.Next() {
		p := store.Policy{OrgID: orgID}
		if err := rows.Scan(&p.Name, &p.Description, &p.CreatedBy, &p.CreatedAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlstore: list policies: %w", err)
		}
		out = append(out, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: list policies: %w", err)
	}
	byName := make(map[string]*store.Policy, len(out))
	for i := range out {
		byName[out[i].Name] = &out[i]
	}
	err = r.policyVersions(ctx, byName, `SELECT name, `+policyVersionCols+` FROM policy_versions WHERE org_id = ?
		ORDER BY name, version`, orgID)
	return out, err
}

// policyVersions appends the versions q answers (name first) to the policies of byName.
func (r reads) policyVersions(ctx context.Context, byName map[string]*store.Policy, q string, args ...any) error {
	rows, err := r.rows(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("sqlstore: policy versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		v, err := scanPolicyVersion(rows, &name)
		if err != nil {
			return fmt.Errorf("sqlstore: policy versions: %w", err)
		}
		if p := byName[name]; p != nil {
			p.Versions = append(p.Versions, v)
		}
	}
	return rows.Err()
}

func (r reads) PolicyEnvironments(ctx context.Context, orgID, name string) ([]string, error) {
	return r.strings(ctx, "policy environments", `SELECT p.env_id FROM env_policies p JOIN environments e ON e.id = p.env_id
		WHERE p.org_id = ? AND p.policy_name = ? AND e.archived = 0 ORDER BY p.env_id`, orgID, name)
}

func (r reads) strings(ctx context.Context, what, q string, args ...any) ([]string, error) {
	rows, err := r.rows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func (r reads) AttachedPolicies(ctx context.Context, envID string) ([]store.AttachedPolicy, error) {
	rows, err := r.rows(ctx, `SELECT a.policy_name, v.version, v.format, v.content, v.content_id, v.comment, v.created_by,
		v.created_at FROM env_policies a JOIN policy_versions v ON v.org_id = a.org_id AND v.name = a.policy_name
		WHERE a.env_id = ? AND v.version = (SELECT MAX(m.version) FROM policy_versions m WHERE m.org_id = a.org_id AND m.name = a.policy_name)
		ORDER BY a.seq`, envID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: attached policies: %w", err)
	}
	defer rows.Close()
	var out []store.AttachedPolicy
	for rows.Next() {
		var a store.AttachedPolicy
		if a.PolicyVersion, err = scanPolicyVersion(rows, &a.Name); err != nil {
			return nil, fmt.Errorf("sqlstore: attached policies: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func (r reads) AttachedPolicyNames(ctx context.Context, orgID string) (map[string][]string, error) {
	rows, err := r.rows(ctx, `SELECT env_id, policy_name FROM env_policies WHERE org_id = ? ORDER BY env_id, seq`, orgID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: attached policy names: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var env, name string
		if err := rows.Scan(&env, &name); err != nil {
			return nil, fmt.Errorf("sqlstore: attached policy names: %w", err)
		}
		out[env] = append(out[env], name)
	}
	return out, rows.Err()
}

// inChunks runs f on consecutive parts of items small enough for one statement each.
func inChunks[T any](items []T, perRow int, f func(part []T) error) error {
	for start, n := 0, rowsPer(perRow); start < len(items); start += n {
		if err := f(items[start:min(start+n, len(items))]); err != nil {
			return err
		}
	}
	return nil
}

func anys[T any](items []T) []any {
	out := make([]any, len(items))
	for i, x := range items {
		out[i] = x
	}
	return out
}

func (r reads) RunningWithPolicies(ctx context.Context, orgID string, fps []string) ([]store.Running, error) {
	var out []store.Running
	err := cut(r.d, fps, 1, func(part []string, prepared bool) error {
		rows, err := r.rows(ctx, oneOffIf(!prepared)+`SELECT r.env_id, r.fingerprint, r.name, r.since FROM env_running r
			WHERE r.org_id = ? AND r.fingerprint IN (`+placeholders(len(part))+`)
			AND EXISTS (SELECT 1 FROM env_policies p WHERE p.env_id = r.env_id)
			ORDER BY r.env_id, r.fingerprint, r.name`, append([]any{orgID}, anys(part)...)...)
		if err != nil {
			return fmt.Errorf("sqlstore: running with policies: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var x store.Running
			if err := rows.Scan(&x.EnvID, &x.Fingerprint, &x.Name, &x.Since); err != nil {
				return fmt.Errorf("sqlstore: running with policies: %w", err)
			}
			out = append(out, x)
		}
		return rows.Err()
	})
	// Each part is in order; the whole must be too, for the evaluator locks environments in order.
	slices.SortFunc(out, func(x, y store.Running) int {
		return cmp.Or(cmp.Compare(x.EnvID, y.EnvID), cmp.Compare(x.Fingerprint, y.Fingerprint), cmp.Compare(x.Name, y.Name))
	})
	return out, err
}

const verdictCols = `env_id, name, fingerprint, input_hash, compliant, allowlisted, failed, policies, evaluated_at`

func (r reads) verdicts(ctx context.Context, q string, args ...any) ([]store.Verdict, error) {
	rows, err := r.rows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: verdicts: %w", err)
	}
	defer rows.Close()
	var out []store.Verdict
	for rows.Next() {
		var v store.Verdict
		var compliant, allowlisted, failed int
		var policies string
		if err := rows.Scan(&v.EnvID, &v.Name, &v.Fingerprint, &v.InputHash, &compliant, &allowlisted, &failed, &policies,
			&v.EvaluatedAt); err != nil {
			return nil, fmt.Errorf("sqlstore: verdicts: %w", err)
		}
		v.Compliant, v.Allowlisted, v.Failed = compliant != 0, allowlisted != 0, failed != 0
		if err := json.Unmarshal([]byte(policies), &v.Policies); err != nil {
			return nil, fmt.Errorf("sqlstore: verdict policies of %s: %w", v.Fingerprint, err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (r reads) Verdicts(ctx context.Context, envID string, fps []string) ([]store.Verdict, error) {
	if fps == nil {
		return r.verdicts(ctx, `SELECT `+verdictCols+` FROM env_verdicts WHERE env_id = ? ORDER BY fingerprint, name`, envID)
	}
	var out []store.Verdict
	err := inChunks(slices.Compact(slices.Sorted(slices.Values(fps))), 1, func(part []string) error {
		vs, err := r.verdicts(ctx, oneOffIf(len(part) > 1)+`SELECT `+verdictCols+` FROM env_verdicts WHERE env_id = ?
			AND fingerprint IN (`+placeholders(len(part))+`) ORDER BY fingerprint, name`, append([]any{envID}, anys(part)...)...)
		out = append(out, vs...)
		return err
	})
	return out, err
}

func (r reads) VerdictStates(ctx context.Context, envID string, fps []string) (map[store.VerdictKey]store.VerdictState, error) {
	out := map[store.VerdictKey]store.VerdictState{}
	scan := func(q string, args ...any) error {
		rows, err := r.rows(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("sqlstore: verdict states: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var k store.VerdictKey
			var v store.VerdictState
			var compliant, failed int
			if err := rows.Scan(&k.Name, &k.Fingerprint, &v.InputHash, &compliant, &failed); err != nil {
				return fmt.Errorf("sqlstore: verdict states: %w", err)
			}
			v.Compliant, v.Failed = compliant != 0, failed != 0
			out[k] = v
		}
		return rows.Err()
	}
	const cols = `SELECT name, fingerprint, input_hash, compliant, failed FROM env_verdicts WHERE env_id = ?`
	if fps == nil {
		return out, scan(cols, envID)
	}
	return out, cut(r.d, slices.Compact(slices.Sorted(slices.Values(fps))), 1, func(part []string, prepared bool) error {
		return scan(oneOffIf(!prepared)+cols+` AND fingerprint IN (`+placeholders(len(part))+`)`, append([]any{envID}, anys(part)...)...)
	})
}

func (r reads) RunningWithPoliciesOfFlow(ctx context.Context, orgID, flowID string) ([]store.Running, error) {
	rows, err := r.rows(ctx, `SELECT DISTINCT r.env_id, r.fingerprint, r.name, r.since FROM env_running r
		JOIN artifacts a ON a.org_id = r.org_id AND a.fingerprint = r.fingerprint
		WHERE r.org_id = ? AND a.flow_id = ? AND EXISTS (SELECT 1 FROM env_policies p WHERE p.env_id = r.env_id)
		ORDER BY r.env_id, r.fingerprint, r.name`, orgID, flowID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: running with policies of flow: %w", err)
	}
	defer rows.Close()
	var out []store.Running
	for rows.Next() {
		var x store.Running
		if err := rows.Scan(&x.EnvID, &x.Fingerprint, &x.Name, &x.Since); err != nil {
			return nil, fmt.Errorf("sqlstore: running with policies of flow: %w", err)
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// envColCount is the number of envCols.
const envColCount = 15

// environmentVerdictsQuery is EnvironmentVerdicts' query: the environment's columns (envCols) on every row.
const environmentVerdictsQuery = `SELECT en.id, en.org_id, en.name, en.type, en.description, en.include_scaling,
	en.require_provenance, en.included, en.tags, en.archived, en.created_at, en.last_modified_at, en.last_reported_at,
	en.last_changed_at, en.state, v.name, v.input_hash, v.compliant, v.allowlisted, v.failed, v.policies, v.evaluated_at,
	p.policy_id, p.compliant, p.failed, d.doc
	FROM environments en LEFT JOIN env_verdicts v ON v.env_id = en.id AND v.fingerprint = ?
	LEFT JOIN policy_evaluations p ON p.org_id = en.org_id AND p.input_hash = v.input_hash
	LEFT JOIN rule_docs d ON d.org_id = p.org_id AND d.id = p.doc_id
	WHERE en.org_id = ? AND en.name = ? AND en.archived = 0 ORDER BY v.name`

func (r reads) EnvironmentVerdicts(ctx context.Context, orgID, envName, fp string) (store.Environment, []store.Verdict, []store.PolicyEvaluation, error) {
	rows, err := r.rows(ctx, environmentVerdictsQuery, fp, orgID, envName)
	if err != nil {
		return store.Environment{}, nil, nil, fmt.Errorf("sqlstore: environment verdicts: %w", err)
	}
	defer rows.Close()
	var env store.Environment
	var verdicts []store.Verdict
	var evals []store.PolicyEvaluation
	found := false
	seenEval := map[[2]string]bool{}
	for rows.Next() {
		var vName, vHash, vPolicies, pID, pDoc *string
		var vCompliant, vAllowlisted, vFailed, pCompliant, pFailed *int64
		var vAt *float64
		rest := []any{&vName, &vHash, &vCompliant, &vAllowlisted, &vFailed, &vPolicies, &vAt, &pID, &pCompliant, &pFailed, &pDoc}
		if !found { // the environment's columns repeat on every row: decode them once
			if env, err = scanEnv(rowWith{rows, rest}); err != nil {
				return env, nil, nil, fmt.Errorf("sqlstore: environment verdicts: %w", err)
			}
			found = true
		} else {
			skip := make([]any, envColCount)
			for i := range skip {
				skip[i] = new(any)
			}
			if err := rows.Scan(append(skip, rest...)...); err != nil {
				return env, nil, nil, fmt.Errorf("sqlstore: environment verdicts: %w", err)
			}
		}
		e := env
		if vName == nil {
			continue // no verdict on the fingerprint
		}
		if n := len(verdicts); n == 0 || verdicts[n-1].Name != *vName {
			v := store.Verdict{EnvID: e.ID, Name: *vName, Fingerprint: fp, InputHash: *vHash, Compliant: *vCompliant != 0,
				Allowlisted: *vAllowlisted != 0, Failed: *vFailed != 0, EvaluatedAt: *vAt}
			if err := json.Unmarshal([]byte(*vPolicies), &v.Policies); err != nil {
				return env, nil, nil, fmt.Errorf("sqlstore: verdict policies of %s: %w", fp, err)
			}
			verdicts = append(verdicts, v)
		}
		if pID != nil && !seenEval[[2]string{*pID, *vHash}] {
			seenEval[[2]string{*pID, *vHash}] = true
			evals = append(evals, store.PolicyEvaluation{PolicyID: *pID, InputHash: *vHash, Compliant: *pCompliant != 0,
				Failed: *pFailed != 0, RuleEvaluations: json.RawMessage(*pDoc)})
		}
	}
	if err := rows.Err(); err != nil {
		return env, nil, nil, fmt.Errorf("sqlstore: environment verdicts: %w", err)
	}
	if !found {
		return env, nil, nil, fmt.Errorf("sqlstore: environment %s: %w", envName, store.ErrNotFound)
	}
	return env, verdicts, evals, nil
}

// rowWith scans a row whose leading columns another scanner reads, into that scanner's targets and then extra.
type rowWith struct {
	rows  *sql.Rows
	extra []any
}

func (r rowWith) Scan(dest ...any) error { return r.rows.Scan(append(dest, r.extra...)...) }

func (r reads) NonCompliantVerdicts(ctx context.Context, envID string) (int, error) {
	return r.count(ctx, "non-compliant verdicts", `SELECT COUNT(*) FROM env_verdicts WHERE env_id = ? AND compliant = 0`, envID)
}

func (r reads) PolicyEvaluations(ctx context.Context, orgID string, hashes []string) ([]store.PolicyEvaluation, error) {
	var out []store.PolicyEvaluation
	err := cut(r.d, slices.Compact(slices.Sorted(slices.Values(hashes))), 1, func(part []string, prepared bool) error {
		rows, err := r.rows(ctx, oneOffIf(!prepared)+`SELECT p.policy_id, p.input_hash, p.compliant, p.failed, d.doc
			FROM policy_evaluations p JOIN rule_docs d ON d.org_id = p.org_id AND d.id = p.doc_id
			WHERE p.org_id = ? AND p.input_hash IN (`+placeholders(len(part))+`)`, append([]any{orgID}, anys(part)...)...)
		if err != nil {
			return fmt.Errorf("sqlstore: policy evaluations: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var e store.PolicyEvaluation
			var compliant, failed int
			var doc string
			if err := rows.Scan(&e.PolicyID, &e.InputHash, &compliant, &failed, &doc); err != nil {
				return fmt.Errorf("sqlstore: policy evaluations: %w", err)
			}
			e.Compliant, e.Failed, e.RuleEvaluations = compliant != 0, failed != 0, json.RawMessage(doc)
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}

func (r reads) PolicyOutcomes(ctx context.Context, orgID string, hashes []string) ([]store.PolicyOutcome, error) {
	var out []store.PolicyOutcome
	err := cut(r.d, slices.Compact(slices.Sorted(slices.Values(hashes))), 1, func(part []string, prepared bool) error {
		rows, err := r.rows(ctx, oneOffIf(!prepared)+`SELECT policy_id, input_hash, compliant FROM policy_evaluations
			WHERE org_id = ? AND failed = 0 AND input_hash IN (`+placeholders(len(part))+`)`, append([]any{orgID}, anys(part)...)...)
		if err != nil {
			return fmt.Errorf("sqlstore: policy outcomes: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var o store.PolicyOutcome
			var compliant int
			if err := rows.Scan(&o.PolicyID, &o.InputHash, &compliant); err != nil {
				return fmt.Errorf("sqlstore: policy outcomes: %w", err)
			}
			o.Compliant = compliant != 0
			out = append(out, o)
		}
		return rows.Err()
	})
	return out, err
}

func (r reads) SnapshotPolicies(ctx context.Context, envID string, index int) ([]store.SnapshotPolicy, error) {
	var doc string
	err := r.row(ctx, `SELECT policies FROM snapshot_policies WHERE env_id = ? AND idx = ?`, envID, index).Scan(&doc)
	if err != nil {
		if err = notFound(err, "snapshot policies"); errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	var out []store.SnapshotPolicy
	if err := json.Unmarshal([]byte(doc), &out); err != nil {
		return nil, fmt.Errorf("sqlstore: snapshot %d policies: %w", index, err)
	}
	return out, nil
}

// TrailAttestationFactsByIDs is the positional read from every trail's start.
func (r reads) TrailAttestationFactsByIDs(ctx context.Context, trailIDs []string) (map[string][]store.AttestationFact, error) {
	after := make(map[string]int64, len(trailIDs))
	for _, id := range trailIDs {
		after[id] = 0
	}
	facts, _, err := r.TrailAttestationFactsAfter(ctx, after)
	return facts, err
}

// factsAfter is TrailAttestationFactsAfter's query over a VALUES list of (trail, position).
// SQLite joins each row to its index range. PostgreSQL, on a table its statistics do not cover
// yet (a new deployment's first minute, until autovacuum analyses it), joined by hashing a scan
// of every attestation: 13 ms at 20,000 rows and growing with the table, against 1 ms. A
// LATERAL subquery that cannot be flattened (OFFSET 0) makes it a range a row, with or without
// statistics.
func (d dialect) factsAfter(values string) string {
	const cols = `a.seq, a.id, a.name, a.type, a.is_compliant, a.artifact_fingerprint, a.target_artifact, a.overrides_id, a.created_at`
	if d.name == postgresDialect.name {
		return `SELECT w.column1, ` + cols + ` FROM (VALUES ` + values + `) AS w
			CROSS JOIN LATERAL (SELECT ` + cols + ` FROM attestations a WHERE a.trail_id = w.column1 AND a.seq > w.column2 OFFSET 0) a
			ORDER BY w.column1, a.seq`
	}
	return `SELECT a.trail_id, ` + cols + ` FROM (VALUES ` + values + `) AS w
			JOIN attestations a ON a.trail_id = w.column1 AND a.seq > w.column2 ORDER BY a.trail_id, a.seq`
}

func (r reads) TrailAttestationFactsAfter(ctx context.Context, after map[string]int64) (map[string][]store.AttestationFact, map[string]int64, error) {
	out, last := map[string][]store.AttestationFact{}, map[string]int64{}
	err := cut(r.d, slices.Sorted(maps.Keys(after)), 2, func(part []string, prepared bool) error {
		args := make([]any, 0, 2*len(part))
		for _, id := range part {
			args = append(args, id, after[id])
		}
		// Each (trail, position) row is an index range on attestations_trail_facts.
		rows, err := r.rows(ctx, oneOffIf(!prepared)+r.d.factsAfter(typedRows(len(part), "?", "CAST(? AS BIGINT)")), args...)
		if err != nil {
			return fmt.Errorf("sqlstore: attestation facts after: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var trail string
			var seq int64
			var a store.AttestationFact
			var compliant int
			if err := rows.Scan(&trail, &seq, &a.ID, &a.Name, &a.Type, &compliant, &a.ArtifactFingerprint, &a.TargetArtifact,
				&a.OverridesID, &a.CreatedAt); err != nil {
				return fmt.Errorf("sqlstore: attestation facts after: %w", err)
			}
			a.IsCompliant = compliant != 0
			out[trail] = append(out[trail], a)
			last[trail] = seq
		}
		return rows.Err()
	})
	return out, last, err
}

func (r reads) DecisionControls(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	err := cut(r.d, ids, 1, func(part []string, prepared bool) error {
		rows, err := r.rows(ctx, oneOffIf(!prepared)+`SELECT id, data FROM attestations WHERE type = 'decision' AND id IN (`+
			placeholders(len(part))+`)`, anys(part)...)
		if err != nil {
			return fmt.Errorf("sqlstore: decision controls: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, data string
			if err := rows.Scan(&id, &data); err != nil {
				return fmt.Errorf("sqlstore: decision controls: %w", err)
			}
			var d struct {
				Control string `json:"control"`
			}
			if err := json.Unmarshal([]byte(data), &d); err != nil {
				return fmt.Errorf("sqlstore: decision %s: %w", id, err)
			}
			out[id] = d.Control
		}
		return rows.Err()
	})
	return out, err
}

// --- writes

func (t *txn) PutPolicyVersion(ctx context.Context, orgID, name, description string, v store.PolicyVersion) error {
	if v.Version == 1 {
		if _, err := t.exec(ctx, "insert policy", `INSERT INTO policies (org_id, name, description, created_by, created_at)
			VALUES (?, ?, ?, ?, ?)`, orgID, name, description, v.CreatedBy, v.CreatedAt); err != nil {
			return err
		}
	} else if description != "" {
		if err := t.SetPolicyDescription(ctx, orgID, name, description); err != nil {
			return err
		}
	}
	_, err := t.exec(ctx, "insert policy version", `INSERT INTO policy_versions (org_id, name, `+policyVersionCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, orgID, name, v.Version, v.Format, v.Content, v.ContentID, v.Comment, v.CreatedBy, v.CreatedAt)
	return err
}

func (t *txn) SetPolicyDescription(ctx context.Context, orgID, name, description string) error {
	n, err := t.exec(ctx, "set policy description", `UPDATE policies SET description = ? WHERE org_id = ? AND name = ?`,
		description, orgID, name)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: set policy description %s: %w", name, store.ErrNotFound)
	}
	return err
}

func (t *txn) AttachPolicies(ctx context.Context, orgID, envID string, names []string, at float64) error {
	return inChunks(names, 4, func(part []string) error {
		args := make([]any, 0, 4*len(part))
		for _, n := range part {
			args = append(args, envID, orgID, n, at)
		}
		_, err := t.exec(ctx, "attach policies", oneOff+`INSERT INTO env_policies (env_id, org_id, policy_name, attached_at) VALUES `+
			rowsOf(len(part), 4)+` ON CONFLICT (env_id, policy_name) DO NOTHING`, args...)
		return err
	})
}

func (t *txn) DetachPolicies(ctx context.Context, envID string, names []string) error {
	return inChunks(names, 1, func(part []string) error {
		_, err := t.exec(ctx, "detach policies", oneOff+`DELETE FROM env_policies WHERE env_id = ? AND policy_name IN (`+
			placeholders(len(part))+`)`, append([]any{envID}, anys(part)...)...)
		return err
	})
}

// LockEnvironment takes the environment's row lock on PostgreSQL until the transaction ends. SQLite runs one write
// transaction at a time, so there it is a no-op and costs no round trip.
func (t *txn) LockEnvironment(ctx context.Context, envID string) error {
	if t.d.name != postgresDialect.name {
		return nil
	}
	rows, err := t.rows(ctx, `SELECT id FROM environments WHERE id = ? FOR UPDATE`, envID)
	if err != nil {
		return fmt.Errorf("sqlstore: lock environment %s: %w", envID, err)
	}
	return rows.Close()
}

// PutPolicyEvaluations stores each distinct rule-evaluations document once, by its SHA-256, and each evaluation
// as a reference to it: two statements however many evaluations (on SQLite, in parts of the sizes kept prepared).
func (t *txn) PutPolicyEvaluations(ctx context.Context, orgID string, evals []store.PolicyEvaluation) error {
	ids := make([]string, len(evals))
	docs := map[string]string{}
	for i, e := range evals {
		sum := sha256.Sum256(e.RuleEvaluations)
		ids[i] = hex.EncodeToString(sum[:16])
		if _, ok := docs[ids[i]]; !ok { // most evaluations share a few documents
			docs[ids[i]] = string(e.RuleEvaluations)
		}
	}
	distinct := slices.Sorted(maps.Keys(docs))
	if err := cut(t.d, distinct, 3, func(part []string, prepared bool) error {
		args := make([]any, 0, 3*len(part))
		for _, id := range part {
			args = append(args, orgID, id, docs[id])
		}
		_, err := t.exec(ctx, "put rule documents", oneOffIf(!prepared)+`INSERT INTO rule_docs (org_id, id, doc) VALUES `+rowsOf(len(part), 3)+
			` ON CONFLICT (org_id, id) DO NOTHING`, args...)
		return err
	}); err != nil {
		return err
	}
	idx := make([]int, len(evals))
	for i := range idx {
		idx[i] = i
	}
	return cut(t.d, idx, 6, func(part []int, prepared bool) error {
		args := make([]any, 0, 6*len(part))
		for _, i := range part {
			e := evals[i]
			args = append(args, orgID, e.InputHash, e.PolicyID, b2i(e.Compliant), b2i(e.Failed), ids[i])
		}
		_, err := t.exec(ctx, "put policy evaluations", oneOffIf(!prepared)+`INSERT INTO policy_evaluations (org_id, input_hash, policy_id,
			compliant, failed, doc_id) VALUES `+rowsOf(len(part), 6)+` ON CONFLICT (org_id, input_hash, policy_id) DO UPDATE
			SET compliant = excluded.compliant, failed = excluded.failed, doc_id = excluded.doc_id WHERE policy_evaluations.failed = 1`, args...)
		return err
	})
}

func (t *txn) PutSnapshotPolicies(ctx context.Context, envID string, index int, policies []store.SnapshotPolicy) error {
	doc, err := json.Marshal(policies)
	if err != nil {
		return fmt.Errorf("sqlstore: snapshot policies: %w", err)
	}
	_, err = t.exec(ctx, "put snapshot policies", `INSERT INTO snapshot_policies (env_id, idx, policies) VALUES (?, ?, ?)
		ON CONFLICT (env_id, idx) DO UPDATE SET policies = excluded.policies`, envID, index, string(doc))
	return err
}

func (t *txn) PutVerdicts(ctx context.Context, orgID string, verdicts []store.Verdict) error {
	return cut(t.d, verdicts, 10, func(part []store.Verdict, prepared bool) error {
		args := make([]any, 0, 10*len(part))
		for _, v := range part {
			policies, err := json.Marshal(nonNilPolicies(v.Policies))
			if err != nil {
				return fmt.Errorf("sqlstore: verdict policies: %w", err)
			}
			args = append(args, v.EnvID, v.Fingerprint, v.Name, orgID, v.InputHash, b2i(v.Compliant), b2i(v.Allowlisted),
				b2i(v.Failed), string(policies), v.EvaluatedAt)
		}
		_, err := t.exec(ctx, "put verdicts", oneOffIf(!prepared)+`INSERT INTO env_verdicts (env_id, fingerprint, name, org_id, input_hash,
			compliant, allowlisted, failed, policies, evaluated_at) VALUES `+rowsOf(len(part), 10)+`
			ON CONFLICT (env_id, fingerprint, name) DO UPDATE SET input_hash = excluded.input_hash,
			compliant = excluded.compliant, allowlisted = excluded.allowlisted, failed = excluded.failed,
			policies = excluded.policies, evaluated_at = excluded.evaluated_at`, args...)
		return err
	})
}

func nonNilPolicies(p []store.VerdictPolicy) []store.VerdictPolicy {
	if p == nil {
		return []store.VerdictPolicy{}
	}
	return p
}

func (t *txn) DeleteVerdicts(ctx context.Context, envID string, keys []store.VerdictKey) error {
	if keys == nil {
		_, err := t.exec(ctx, "delete verdicts", `DELETE FROM env_verdicts WHERE env_id = ?`, envID)
		return err
	}
	return cut(t.d, keys, 2, func(part []store.VerdictKey, prepared bool) error {
		args := make([]any, 0, 1+2*len(part))
		args = append(args, envID)
		for _, k := range part {
			args = append(args, k.Fingerprint, k.Name)
		}
		_, err := t.exec(ctx, "delete verdicts", oneOffIf(!prepared)+`DELETE FROM env_verdicts WHERE env_id = ? AND (fingerprint, name) IN (VALUES `+
			rowsOf(len(part), 2)+`)`, args...)
		return err
	})
}

func (t *txn) SetEnvironmentState(ctx context.Context, orgID, envID string, state *bool) (bool, error) {
	var v any
	if state != nil {
		v = b2i(*state)
		// A decided state that differs from the stored one fires ON_COMPLIANT_ENV or
		// ON_NON_COMPLIANT_ENV, in this transaction, as UpdateEnvironment does.
		env, err := t.EnvironmentByID(ctx, orgID, envID)
		if err != nil {
			return false, err
		}
		env.State = state
		if err := t.enqueueComplianceChange(ctx, env); err != nil {
			return false, err
		}
	}
	n, err := t.exec(ctx, "set environment state", `UPDATE environments SET state = ? WHERE org_id = ? AND id = ?
		AND state IS DISTINCT FROM ?`, v, orgID, envID, v)
	return n > 0, err
}

func (t *txn) SetLatestSnapshotCompliance(ctx context.Context, envID string, compliant *bool) error {
	var v any
	if compliant != nil {
		v = b2i(*compliant)
	}
	_, err := t.exec(ctx, "set snapshot compliance", `UPDATE snapshots SET compliant = ? WHERE env_id = ?
		AND idx = (SELECT MAX(idx) FROM snapshots WHERE env_id = ?)`, v, envID, envID)
	return err
}

// Policy reads delegate to the read pool.

func (s *Store) FingerprintReports(ctx context.Context, orgID string, fps []string) ([]store.FingerprintReport, error) {
	return s.reader().FingerprintReports(ctx, orgID, fps)
}

func (s *Store) Policy(ctx context.Context, orgID, name string) (store.Policy, error) {
	return s.reader().Policy(ctx, orgID, name)
}

func (s *Store) ListPolicies(ctx context.Context, orgID string) ([]store.Policy, error) {
	return s.reader().ListPolicies(ctx, orgID)
}

func (s *Store) PolicyEnvironments(ctx context.Context, orgID, name string) ([]string, error) {
	return s.reader().PolicyEnvironments(ctx, orgID, name)
}

func (s *Store) AttachedPolicies(ctx context.Context, envID string) ([]store.AttachedPolicy, error) {
	return s.reader().AttachedPolicies(ctx, envID)
}

func (s *Store) AttachedPolicyNames(ctx context.Context, orgID string) (map[string][]string, error) {
	return s.reader().AttachedPolicyNames(ctx, orgID)
}

func (s *Store) RunningWithPolicies(ctx context.Context, orgID string, fps []string) ([]store.Running, error) {
	return s.reader().RunningWithPolicies(ctx, orgID, fps)
}

func (s *Store) Verdicts(ctx context.Context, envID string, fps []string) ([]store.Verdict, error) {
	return s.reader().Verdicts(ctx, envID, fps)
}

func (s *Store) EnvironmentVerdicts(ctx context.Context, orgID, envName, fp string) (store.Environment, []store.Verdict, []store.PolicyEvaluation, error) {
	return s.reader().EnvironmentVerdicts(ctx, orgID, envName, fp)
}

func (s *Store) VerdictStates(ctx context.Context, envID string, fps []string) (map[store.VerdictKey]store.VerdictState, error) {
	return s.reader().VerdictStates(ctx, envID, fps)
}

func (s *Store) RunningWithPoliciesOfFlow(ctx context.Context, orgID, flowID string) ([]store.Running, error) {
	return s.reader().RunningWithPoliciesOfFlow(ctx, orgID, flowID)
}

func (s *Store) PolicyOutcomes(ctx context.Context, orgID string, hashes []string) ([]store.PolicyOutcome, error) {
	return s.reader().PolicyOutcomes(ctx, orgID, hashes)
}

func (s *Store) SnapshotPolicies(ctx context.Context, envID string, index int) ([]store.SnapshotPolicy, error) {
	return s.reader().SnapshotPolicies(ctx, envID, index)
}

func (s *Store) NonCompliantVerdicts(ctx context.Context, envID string) (int, error) {
	return s.reader().NonCompliantVerdicts(ctx, envID)
}

func (s *Store) PolicyEvaluations(ctx context.Context, orgID string, hashes []string) ([]store.PolicyEvaluation, error) {
	return s.reader().PolicyEvaluations(ctx, orgID, hashes)
}

func (s *Store) TrailAttestationFactsByIDs(ctx context.Context, trailIDs []string) (map[string][]store.AttestationFact, error) {
	return s.reader().TrailAttestationFactsByIDs(ctx, trailIDs)
}

func (s *Store) TrailAttestationFactsAfter(ctx context.Context, after map[string]int64) (map[string][]store.AttestationFact, map[string]int64, error) {
	return s.reader().TrailAttestationFactsAfter(ctx, after)
}

func (s *Store) DecisionControls(ctx context.Context, ids []string) (map[string]string, error) {
	return s.reader().DecisionControls(ctx, ids)
}
