package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/policyeval"
)

// perPage is the length of a page of a long list.
const perPage = 50

// paging is a window of a long list and the links around it; Param is the query parameter
// that names the page (a page may page two lists).
type paging struct {
	Param             string
	Page, Total, Last int
}

// newPaging is the window of total items the query's param asks for, size items a page.
func (c *call) paging(param string, size, total int) paging {
	p, _ := strconv.Atoi(c.r.URL.Query().Get(param))
	last := max(1, (total+size-1)/size)
	return paging{Param: param, Page: min(max(p, 1), last), Total: total, Last: last}
}

// pageParam is the page of a list the query's param asks for (1 when absent).
func (c *call) pageParam(param string) int {
	p, _ := strconv.Atoi(c.r.URL.Query().Get(param))
	return max(p, 1)
}

type orgData struct {
	Flows        []store.Flow
	FlowCount    int
	Environments []store.Environment
	// Failing are the non-compliant trails among the organization's latest, newest first.
	Failing   []failingTrail
	FlowNames map[string]string
}

type failingTrail struct {
	Flow  string
	Trail store.Trail
}

// recentTrails is how many of the latest trails the organization page looks through for
// non-compliant ones.
const recentTrails = 200

func (s *Site) orgPage(c *call) (string, string, any, error) {
	flows, n, err := s.store.ListFlows(c.ctx(), c.p.Org.ID, store.FlowFilter{Page: store.Page{Page: 1, PerPage: 200}})
	if err != nil {
		return "", "", nil, fmt.Errorf("list flows: %w", err)
	}
	envs, _, err := s.store.ListEnvironments(c.ctx(), c.p.Org.ID, store.Page{})
	if err != nil {
		return "", "", nil, fmt.Errorf("list environments: %w", err)
	}
	d := orgData{Flows: flows, FlowCount: n, Environments: envs}
	trails, _, err := s.store.ListTrails(c.ctx(), c.p.Org.ID, store.TrailFilter{Page: store.Page{Page: 1, PerPage: recentTrails},
		NoTotal: true})
	if err != nil {
		return "", "", nil, fmt.Errorf("list trails: %w", err)
	}
	names := make(map[string]string, len(flows))
	for _, f := range flows {
		names[f.ID] = f.Name
	}
	for _, t := range trails {
		if t.State != "NON-COMPLIANT" {
			continue
		}
		name, ok := names[t.FlowID]
		if !ok {
			f, err := s.store.FlowByID(c.ctx(), c.p.Org.ID, t.FlowID)
			if errors.Is(err, store.ErrNotFound) {
				continue // archived
			}
			if err != nil {
				return "", "", nil, fmt.Errorf("look up flow: %w", err)
			}
			name, names[t.FlowID] = f.Name, f.Name
		}
		d.Failing = append(d.Failing, failingTrail{Flow: name, Trail: t})
	}
	return "org", c.p.Org.Name, d, nil
}

type flowData struct {
	Flow   store.Flow
	Trails []store.Trail
	Paging paging
}

func (s *Site) flowPage(c *call) (string, string, any, error) {
	f, err := s.store.FlowByName(c.ctx(), c.p.Org.ID, param(c.r, "flow"))
	if err != nil {
		return "", "", nil, notFound("look up flow", err)
	}
	page := c.pageParam("page")
	trails, total, err := s.store.ListTrails(c.ctx(), c.p.Org.ID, store.TrailFilter{FlowIDs: []string{f.ID},
		Page: store.Page{Page: page, PerPage: perPage}})
	if err != nil {
		return "", "", nil, fmt.Errorf("list trails: %w", err)
	}
	return "flow", f.Name, flowData{Flow: f, Trails: trails, Paging: c.paging("page", perPage, total)}, nil
}

// complianceDoc is the part of a trail's evaluated compliance document the pages show.
type complianceDoc struct {
	AttestationsStatuses []expected              `json:"attestations_statuses"`
	ArtifactsStatuses    map[string]artifactSlot `json:"artifacts_statuses"`
}

// expected is an attestation the template expects (or one reported beyond it) and its status.
type expected struct {
	AttestationName string `json:"attestation_name"`
	AttestationType string `json:"attestation_type"`
	Status          string `json:"status"`
	IsCompliant     *bool  `json:"is_compliant"`
	Unexpected      bool   `json:"unexpected"`
}

// State is the expected attestation's state: missing, else whether it complies (its status
// says only that it was reported).
func (e expected) State() state {
	if strings.EqualFold(e.Status, "MISSING") || e.IsCompliant == nil {
		return stateOf(e.Status)
	}
	return verdictOf(e.IsCompliant)
}

type artifactSlot struct {
	ArtifactFingerprint  *string    `json:"artifact_fingerprint"`
	Status               string     `json:"status"`
	AttestationsStatuses []expected `json:"attestations_statuses"`
}

func decodeCompliance(raw json.RawMessage) complianceDoc {
	var d complianceDoc
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &d) // written by the evaluator; not evaluated yet decodes to nothing
	}
	return d
}

// trailEvent is an entry of a trail's history as the page shows it.
type trailEvent struct {
	Type            string  `json:"type"`
	Timestamp       float64 `json:"timestamp"`
	User            string  `json:"user"`
	AttestationName string  `json:"attestation_name"`
}

// attestationsPerPage is how many attestations a trail page shows.
const attestationsPerPage = 100

type trailData struct {
	Flow         store.Flow
	Trail        store.Trail
	Attestations []store.Attestation
	Artifacts    []store.Artifact
	Expected     []expected
	ArtifactSlot map[string]artifactSlot
	Events       []trailEvent
	Selected     string // the attestation_id of the link followed
	// AttestationPaging pages the attestations, newest first; the page of a followed link is
	// the one that holds its attestation.
	AttestationPaging paging
	EventPaging       paging
	// Anonymous readers of a public organization see no attestations, as in the API.
	Anonymous bool
}

func (s *Site) trailPage(c *call) (string, string, any, error) {
	ctx := c.ctx()
	f, err := s.store.FlowByName(ctx, c.p.Org.ID, param(c.r, "flow"))
	if err != nil {
		return "", "", nil, notFound("look up flow", err)
	}
	t, err := s.store.TrailByName(ctx, f.ID, param(c.r, "trail"))
	if err != nil {
		return "", "", nil, notFound("look up trail", err)
	}
	arts, err := s.store.TrailArtifacts(ctx, t.ID)
	if err != nil {
		return "", "", nil, fmt.Errorf("list artifacts: %w", err)
	}
	doc := decodeCompliance(t.Compliance)
	d := trailData{Flow: f, Trail: t, Artifacts: arts, Expected: doc.AttestationsStatuses, ArtifactSlot: doc.ArtifactsStatuses,
		Selected: c.r.URL.Query().Get("attestation_id"), Anonymous: c.p.Anonymous}
	if c.p.Anonymous {
		return "trail", t.Name, d, nil
	}
	atts, err := s.store.TrailAttestations(ctx, t.ID)
	if err != nil {
		return "", "", nil, fmt.Errorf("list attestations: %w", err)
	}
	slices.Reverse(atts) // newest first
	raw, err := s.store.TrailEvents(ctx, t.ID)
	if err != nil {
		return "", "", nil, fmt.Errorf("list trail events: %w", err)
	}
	events := make([]trailEvent, 0, len(raw))
	for i := len(raw) - 1; i >= 0; i-- { // newest first
		var ev trailEvent
		if json.Unmarshal(raw[i].Doc, &ev) == nil {
			if ev.Timestamp == 0 {
				ev.Timestamp = raw[i].At
			}
			events = append(events, ev)
		}
	}
	d.AttestationPaging = c.paging("attestations", attestationsPerPage, len(atts))
	if c.r.URL.Query().Get("attestations") == "" && d.Selected != "" {
		if i := slices.IndexFunc(atts, func(a store.Attestation) bool { return a.ID == d.Selected }); i >= 0 {
			d.AttestationPaging.Page = i/attestationsPerPage + 1
		}
	}
	from := (d.AttestationPaging.Page - 1) * attestationsPerPage
	d.Attestations = atts[from:min(len(atts), from+attestationsPerPage)]
	d.EventPaging = c.paging("events", attestationsPerPage, len(events))
	from = (d.EventPaging.Page - 1) * attestationsPerPage
	d.Events = events[from:min(len(events), from+attestationsPerPage)]
	return "trail", t.Name, d, nil
}

// envVerdict is an artifact's verdict in one environment where it runs, with each policy's rule
// evaluations.
type envVerdict struct {
	Env         string
	Since       float64
	Judged      bool
	Compliant   bool
	Allowlisted bool
	Policies    []policyView
}

// policyView is one policy's evaluation of an artifact, its rules decoded.
type policyView struct {
	Name      string
	Version   int
	Compliant bool
	Rules     []envpolicy.RuleEvaluation
}

func policyViews(evals []policyeval.Evaluation) []policyView {
	out := make([]policyView, 0, len(evals))
	for _, e := range evals {
		v := policyView{Name: e.PolicyName, Version: e.PolicyVersion, Compliant: e.Compliant}
		_ = json.Unmarshal(e.RuleEvaluations, &v.Rules) // written by the evaluator: it always decodes
		out = append(out, v)
	}
	return out
}

// provenance is where an artifact was built, as its report said.
type provenance struct {
	BuildURL  string `json:"build_url"`
	CommitURL string `json:"commit_url"`
	RepoURL   string `json:"repo_url"`
}

type artifactData struct {
	Built        provenance
	Flow         store.Flow
	Artifact     store.Artifact
	Trail        store.Trail
	Slot         *artifactSlot
	Attestations []store.Attestation
	Running      []envVerdict
	Anonymous    bool
}

func (s *Site) artifactPage(c *call) (string, string, any, error) {
	ctx := c.ctx()
	f, err := s.store.FlowByName(ctx, c.p.Org.ID, param(c.r, "flow"))
	if err != nil {
		return "", "", nil, notFound("look up flow", err)
	}
	fp := param(c.r, "fp")
	reports, err := s.store.ArtifactsByFingerprints(ctx, c.p.Org.ID, []string{fp})
	if err != nil {
		return "", "", nil, fmt.Errorf("look up artifact: %w", err)
	}
	want := c.r.URL.Query().Get("artifact_id")
	var art *store.Artifact
	for i := range reports {
		a := &reports[i]
		if a.FlowID != f.ID || (want != "" && a.ID != want) {
			continue
		}
		if art == nil || a.CreatedAt > art.CreatedAt {
			art = a
		}
	}
	if art == nil {
		return "", "", nil, errNotFound
	}
	t, err := s.store.TrailByID(ctx, art.TrailID)
	if err != nil {
		return "", "", nil, notFound("look up trail", err)
	}
	d := artifactData{Flow: f, Artifact: *art, Trail: t, Anonymous: c.p.Anonymous}
	if len(art.Report) > 0 {
		_ = json.Unmarshal(art.Report, &d.Built) // the report as sent, validated by ingest; missing fields stay empty
	}
	for _, slot := range decodeCompliance(t.Compliance).ArtifactsStatuses {
		if slot.ArtifactFingerprint != nil && *slot.ArtifactFingerprint == fp {
			d.Slot = &slot
			break
		}
	}
	var atts []store.Attestation
	if !c.p.Anonymous {
		if atts, err = s.store.TrailAttestations(ctx, t.ID); err != nil {
			return "", "", nil, fmt.Errorf("list attestations: %w", err)
		}
	}
	for _, a := range atts {
		if a.ArtifactFingerprint == fp || (a.TargetArtifact != "" && a.TargetArtifact == art.TemplateName) {
			d.Attestations = append(d.Attestations, a)
		}
	}
	if d.Running, err = s.runningVerdicts(c, fp); err != nil {
		return "", "", nil, err
	}
	return "artifact", fp, d, nil
}

// runningVerdicts lists where the fingerprint runs now, with its verdicts there (through
// policyquery, as assert reads them).
func (s *Site) runningVerdicts(c *call, fp string) ([]envVerdict, error) {
	ctx := c.ctx()
	running, err := s.store.RunningIn(ctx, c.p.Org.ID, fp)
	if err != nil {
		return nil, fmt.Errorf("look up where it runs: %w", err)
	}
	out := make([]envVerdict, 0, len(running))
	seen := map[string]bool{}
	for _, r := range running {
		if seen[r.EnvID] {
			continue
		}
		seen[r.EnvID] = true
		e, err := s.store.EnvironmentByID(ctx, c.p.Org.ID, r.EnvID)
		if errors.Is(err, store.ErrNotFound) {
			continue // archived since
		}
		if err != nil {
			return nil, fmt.Errorf("look up environment: %w", err)
		}
		facts, err := s.query.Environment(ctx, c.p.Org.ID, e.Name, fp)
		if err != nil {
			return nil, fmt.Errorf("look up verdicts: %w", err)
		}
		v := envVerdict{Env: e.Name, Since: r.Since, Judged: len(facts.Verdicts) > 0, Compliant: true}
		worst := -1
		for i, x := range facts.Verdicts {
			v.Compliant = v.Compliant && x.Compliant
			v.Allowlisted = v.Allowlisted || x.Allowlisted
			if worst < 0 || (!x.Compliant && facts.Verdicts[worst].Compliant) {
				worst = i
			}
		}
		if worst >= 0 {
			w := facts.Verdicts[worst]
			v.Policies = policyViews(policyeval.Expand(w.Policies, w.InputHash, policyeval.Index(facts.Evals)))
		}
		out = append(out, v)
	}
	return out, nil
}

// snapArtifact is an artifact of a snapshot as the page shows it.
type snapArtifact struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
	FlowName    string `json:"flow_name"`
	Compliant   *bool  `json:"compliant"`
	Instances   int    `json:"instances"`
	// CreationTimestamps and Contexts are the instances as the reporter saw them (pods,
	// containers, tasks, ...): Contexts[i] is the one started at CreationTimestamps[i].
	CreationTimestamps []float64        `json:"creationTimestamp"`
	Contexts           []map[string]any `json:"contexts"`
	// Verdict is the policies' decision with its reasons (latest snapshot of an environment with policies).
	Verdict  *store.Verdict `json:"-"`
	Policies []policyView   `json:"-"`
}

// instance is one running copy of an artifact as the page shows it: when it started (0 when
// the reporter did not say) and what the report said of it, by field name.
type instance struct {
	Started float64
	Fields  []instanceField
}

type instanceField struct{ Name, Value string }

// InstanceList pairs the artifact's start times with their contexts, fields in name order.
func (a snapArtifact) InstanceList() []instance {
	n := max(len(a.CreationTimestamps), len(a.Contexts))
	out := make([]instance, n)
	for i := range out {
		if i < len(a.CreationTimestamps) {
			out[i].Started = a.CreationTimestamps[i]
		}
		if i >= len(a.Contexts) {
			continue
		}
		for k, v := range a.Contexts[i] {
			out[i].Fields = append(out[i].Fields, instanceField{Name: k, Value: contextValue(v)})
		}
		slices.SortFunc(out[i].Fields, func(x, y instanceField) int { return strings.Compare(x.Name, y.Name) })
	}
	return out
}

// contextValue shows a value of a report item: text as it is, anything else as JSON.
func contextValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// snapshotEntries splits a snapshot's artifacts without decoding them: a page decodes only
// those it shows (decoding every artifact of a large environment was a fifth of its page's time).
// The split reads the document once with a streaming tokenizer; encoding/json, unmarshalling
// into raw messages, validated the whole document first and was a fifth of the page again.
func snapshotEntries(s store.Snapshot) ([]json.RawMessage, error) {
	if len(s.Artifacts) == 0 {
		return nil, nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(s.Artifacts))
	switch dec.PeekKind() {
	case 'n':
		return nil, nil
	case '[':
	default:
		return nil, fmt.Errorf("decode snapshot: artifacts are not a list (%s)", dec.PeekKind())
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	var raw []json.RawMessage
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return nil, fmt.Errorf("decode snapshot: %w", err)
		}
		raw = append(raw, json.RawMessage(v.Clone()))
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	return raw, nil
}

func decodeArtifacts(raw []json.RawMessage) ([]snapArtifact, error) {
	arts := make([]snapArtifact, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &arts[i]); err != nil {
			return nil, fmt.Errorf("decode snapshot artifact: %w", err)
		}
	}
	return arts, nil
}

func decodeSnapshot(s store.Snapshot) ([]snapArtifact, error) {
	raw, err := snapshotEntries(s)
	if err != nil {
		return nil, err
	}
	return decodeArtifacts(raw)
}

type environmentData struct {
	Org         string
	Env         store.Environment
	Snapshot    *store.Snapshot
	Artifacts   []snapArtifact
	Policies    []store.AttachedPolicy
	Snapshots   []int // the indexes of the latest snapshots, newest first
	Chart       chart
	Events      []envEvent
	EventPaging paging
	// ArtifactPaging pages the latest snapshot's artifacts; NonCompliant counts them all.
	ArtifactPaging paging
	ArtifactCount  int
	NonCompliant   int
}

func (s *Site) environmentPage(c *call) (string, string, any, error) {
	ctx := c.ctx()
	e, err := s.store.EnvironmentByName(ctx, c.p.Org.ID, param(c.r, "env"))
	if err != nil {
		return "", "", nil, notFound("look up environment", err)
	}
	d := environmentData{Org: c.p.Org.Name, Env: e}
	if d.Policies, err = s.store.AttachedPolicies(ctx, e.ID); err != nil {
		return "", "", nil, fmt.Errorf("list attached policies: %w", err)
	}
	snap, err := s.store.LatestSnapshot(ctx, e.ID)
	if errors.Is(err, store.ErrNotFound) {
		return "environment", e.Name, d, s.environmentExtras(c, &d)
	}
	if err != nil {
		return "", "", nil, fmt.Errorf("load latest snapshot: %w", err)
	}
	d.Snapshot = &snap
	all, err := snapshotEntries(snap)
	if err != nil {
		return "", "", nil, err
	}
	d.ArtifactCount = len(all)
	d.ArtifactPaging = c.paging("artifacts", artifactsPerPage, len(all))
	from := (d.ArtifactPaging.Page - 1) * artifactsPerPage
	if d.Artifacts, err = decodeArtifacts(all[from:min(len(all), from+artifactsPerPage)]); err != nil {
		return "", "", nil, err
	}
	for i := snap.Index; i >= max(1, snap.Index-19); i-- {
		d.Snapshots = append(d.Snapshots, i)
	}
	if err := s.judged(c, e, d.Artifacts); err != nil {
		return "", "", nil, err
	}
	if e.State != nil {
		if d.NonCompliant, err = s.store.NonCompliantVerdicts(ctx, e.ID); err != nil {
			return "", "", nil, fmt.Errorf("count non-compliant artifacts: %w", err)
		}
	}
	if err := s.environmentExtras(c, &d); err != nil {
		return "", "", nil, err
	}
	return "environment", e.Name, d, nil
}

// artifactsPerPage is how many artifacts of a snapshot a page shows.
const artifactsPerPage = 100

// judged adds to the latest snapshot's artifacts their verdicts with each policy's rule
// evaluations: the reason an artifact does or does not comply.
func (s *Site) judged(c *call, e store.Environment, arts []snapArtifact) error {
	ctx := c.ctx()
	if e.State == nil || len(arts) == 0 {
		return nil // no policy decides
	}
	fps := make([]string, len(arts))
	for i, a := range arts {
		fps[i] = a.Fingerprint
	}
	verdicts, err := s.store.Verdicts(ctx, e.ID, fps)
	if err != nil {
		return fmt.Errorf("load verdicts: %w", err)
	}
	hashes := make([]string, 0, len(verdicts))
	byKey := make(map[store.VerdictKey]*store.Verdict, len(verdicts))
	for i := range verdicts {
		hashes = append(hashes, verdicts[i].InputHash)
		byKey[verdicts[i].Key()] = &verdicts[i]
	}
	evals, err := s.store.PolicyEvaluations(ctx, c.p.Org.ID, hashes)
	if err != nil {
		return fmt.Errorf("load policy evaluations: %w", err)
	}
	index := policyeval.Index(evals)
	for i := range arts {
		v, ok := byKey[store.VerdictKey{Name: arts[i].Name, Fingerprint: arts[i].Fingerprint}]
		if !ok {
			continue
		}
		arts[i].Verdict = v
		compliant := v.Compliant
		arts[i].Compliant = &compliant
		arts[i].Policies = policyViews(policyeval.Expand(v.Policies, v.InputHash, index))
	}
	return nil
}

type snapshotData struct {
	Env       store.Environment
	Snapshot  store.Snapshot
	Artifacts []snapArtifact
}

func (s *Site) snapshotPage(c *call) (string, string, any, error) {
	ctx := c.ctx()
	e, err := s.store.EnvironmentByName(ctx, c.p.Org.ID, param(c.r, "env"))
	if err != nil {
		return "", "", nil, notFound("look up environment", err)
	}
	idx, err := strconv.Atoi(param(c.r, "index"))
	if err != nil || idx < 1 {
		return "", "", nil, errNotFound
	}
	snap, err := s.store.SnapshotByIndex(ctx, e.ID, idx)
	if err != nil {
		return "", "", nil, notFound("load snapshot", err)
	}
	arts, err := decodeSnapshot(snap)
	if err != nil {
		return "", "", nil, err
	}
	return "snapshot", fmt.Sprintf("%s #%d", e.Name, idx), snapshotData{Env: e, Snapshot: snap, Artifacts: arts}, nil
}

type policyData struct {
	Policy store.Policy
	// Latest is the policy's newest version (Policy.Versions are shown newest first).
	Latest       int
	Environments []string
	// AllEnvironments are the organization's environments, for the what-if form.
	AllEnvironments []string
	// Shown is the version the page shows (?show=, by default the latest), Rego the module it runs.
	Shown            store.PolicyVersion
	Rego             string
	DiffFrom, DiffTo int
	// Diff compares the two versions' sources; RegoDiff the Rego they run, when one is YAML.
	Diff, RegoDiff []diffLine
	WhatIf         *whatIf
}

func (s *Site) policyPage(c *call) (string, string, any, error) {
	ctx := c.ctx()
	p, err := s.store.Policy(ctx, c.p.Org.ID, param(c.r, "policy"))
	if err != nil {
		return "", "", nil, notFound("look up policy", err)
	}
	ids, err := s.store.PolicyEnvironments(ctx, c.p.Org.ID, p.Name)
	if err != nil {
		return "", "", nil, fmt.Errorf("list environments of policy: %w", err)
	}
	all, _, err := s.store.ListEnvironments(ctx, c.p.Org.ID, store.Page{})
	if err != nil {
		return "", "", nil, fmt.Errorf("list environments: %w", err)
	}
	var envs, names []string // the policy's environments and all of them, by name
	for _, e := range all {
		names = append(names, e.Name)
		if slices.Contains(ids, e.ID) {
			envs = append(envs, e.Name)
		}
	}
	versions := slices.Clone(p.Versions)
	slices.Reverse(versions) // newest first
	d := policyData{Policy: p, Latest: p.Latest().Version, Environments: envs, AllEnvironments: names}
	if err := s.policyExtras(c, p, &d); err != nil {
		return "", "", nil, err
	}
	d.Policy.Versions = versions
	return "policy", p.Name, d, nil
}

func (s *Site) controlPage(c *call) (string, string, any, error) {
	ctl, err := s.store.Control(c.ctx(), c.p.Org.ID, param(c.r, "control"))
	if err != nil {
		return "", "", nil, notFound("look up control", err)
	}
	slices.Reverse(ctl.Versions) // newest first
	return "control", ctl.Identifier, ctl, nil
}

type fingerprintData struct {
	Fingerprint string
	Reports     []store.FingerprintReport
	Running     []envVerdict
}

func (s *Site) fingerprintPage(c *call) (string, string, any, error) {
	fp := param(c.r, "fp")
	reports, err := s.store.FingerprintReports(c.ctx(), c.p.Org.ID, []string{fp})
	if err != nil {
		return "", "", nil, fmt.Errorf("look up reports: %w", err)
	}
	running, err := s.runningVerdicts(c, fp)
	if err != nil {
		return "", "", nil, err
	}
	if len(reports) == 0 && len(running) == 0 {
		return "", "", nil, errNotFound
	}
	return "fingerprint", fp, fingerprintData{Fingerprint: fp, Reports: reports, Running: running}, nil
}
