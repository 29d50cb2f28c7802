// Package scale is `veritrail-bench fill` and `veritrail-bench scale`: Fill puts attestations
// over trails and environments with snapshots into a store, through the evaluator's batch apply
// path (no HTTP), and Run measures the reads that must not slow down as the store grows (assert,
// trails, environment events, the web UI's heaviest pages) at several store sizes in one run.
package scale

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/veritrail/veritrail/evaluate"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/template"
)

// Shape of what Fill writes. Ten attestations a trail (one on the trail, nine on its artifact)
// is what the hosted examples' trails hold (cyber-dojo's runner-ci: a pull request, junit,
// snyk, generic and custom attestations); twenty flows of microservices.
const (
	AttestationsPerTrail = 10
	Flows                = 20
	// bigEnvironment is the first environment: a cluster running BigEnvRunning artifacts, the
	// one whose page is the UI's heaviest. The others run SmallEnvRunning each.
	BigEnvRunning   = 200
	SmallEnvRunning = 20
	// snapshotsPerChunk environments get a new snapshot per chunkTrails trails filled, so that
	// the environments' history grows with the store as deployments follow builds.
	chunkTrails       = 1000
	snapshotsPerChunk = 100
	batchMessages     = 500
)

// FillConfig is what Fill adds to a store.
type FillConfig struct {
	Store store.Store
	OrgID string
	// FromTrail and ToTrail are the trails to add, by index (trail i holds attestations
	// 10i..10i+9): a store filled to N attestations has trails [0, N/10), and a later Fill from
	// N/10 grows it.
	FromTrail, ToTrail int
	// Environments is how many environments exist after the fill (created when missing).
	Environments int
	Progress     io.Writer
	Log          *slog.Logger
}

// FlowName is the name of flow i.
func FlowName(i int) string { return fmt.Sprintf("service-%02d-ci", i%Flows) }

// TrailName is the name of trail i: its commit.
func TrailName(i int) string { return hexOf("commit", i)[:40] }

// Fingerprint is the SHA-256 of trail i's artifact.
func Fingerprint(i int) string { return hexOf("artifact", i) }

// EnvName is the name of environment i.
func EnvName(i int) string { return fmt.Sprintf("env-%04d", i) }

func hexOf(kind string, i int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", kind, i)))
	return hex.EncodeToString(h[:])
}

// ids are deterministic, so a fill that grows a store finds what an earlier one made.
func idOf(kind string, i int) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprintf("veritrail-fill-%s-%d", kind, i))).String()
}

// Fill applies the messages of trails [FromTrail, ToTrail) and their environments' snapshots
// with an evaluator of its own, in batches as the evaluate tier does, and returns once every
// trail is evaluated. Nothing else may write the store meanwhile.
func Fill(ctx context.Context, cfg FillConfig) error {
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ev, err := evaluate.New(evaluate.Config{}, evaluate.Deps{Store: cfg.Store,
		Engine: template.NewEngine(template.EngineOptions{}), Log: cfg.Log})
	if err != nil {
		return fmt.Errorf("fill: evaluator: %w", err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- ev.Run(rctx) }()

	g := &gen{org: cfg.OrgID, at: float64(time.Now().Add(-time.Duration(cfg.ToTrail) * time.Second).Unix())}
	var batch []*message.Message
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := ev.HandleBatch(ctx, batch)
		if err != nil {
			return fmt.Errorf("fill: apply a batch: %w", err)
		}
		if n != len(batch) {
			return fmt.Errorf("fill: applied %d of %d messages", n, len(batch))
		}
		batch = batch[:0]
		return nil
	}
	add := func(envs ...*contract.Envelope) error {
		for _, e := range envs {
			b, err := contract.Marshal(e)
			if err != nil {
				return err
			}
			batch = append(batch, message.NewMessage(e.ID, b))
			if len(batch) >= batchMessages {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if cfg.FromTrail == 0 {
		for f := range Flows {
			if err := add(g.flow(f)); err != nil {
				return err
			}
		}
	}
	existing, _, err := cfg.Store.ListEnvironments(ctx, cfg.OrgID, store.Page{})
	if err != nil {
		return fmt.Errorf("fill: list environments: %w", err)
	}
	for e := len(existing); e < cfg.Environments; e++ {
		if err := add(g.environment(e)); err != nil {
			return err
		}
	}
	start := time.Now()
	for i := cfg.FromTrail; i < cfg.ToTrail; i++ {
		if err := add(g.trail(i)...); err != nil {
			return err
		}
		if (i+1)%chunkTrails == 0 || i+1 == cfg.ToTrail {
			// The environments deploy what was just built: the big one once, at the start; then
			// a rotating hundred of the others per chunk.
			if err := flush(); err != nil {
				return err
			}
			chunk := i / chunkTrails
			if chunk == 0 && cfg.FromTrail == 0 {
				if err := add(g.snapshot(0, i+1, BigEnvRunning)); err != nil {
					return err
				}
			}
			for k := range snapshotsPerChunk {
				if cfg.Environments < 2 {
					break
				}
				e := 1 + (chunk*snapshotsPerChunk+k)%(cfg.Environments-1)
				if err := add(g.snapshot(e, i+1, SmallEnvRunning)); err != nil {
					return err
				}
			}
			if err := flush(); err != nil {
				return err
			}
			done := i + 1 - cfg.FromTrail
			el := time.Since(start).Seconds()
			fmt.Fprintf(cfg.Progress, "fill: %d trails, %d attestations (%.0f attestations/s)\n", i+1,
				(i+1)*AttestationsPerTrail, float64(done*AttestationsPerTrail)/el)
		}
	}
	if err := flush(); err != nil {
		return err
	}
	// Every trail evaluated: the store as an evaluator that kept up leaves it.
	for {
		dirty, err := cfg.Store.DirtyTrails(ctx)
		if err != nil {
			return fmt.Errorf("fill: dirty trails: %w", err)
		}
		if len(dirty) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-runErr:
			return fmt.Errorf("fill: the evaluator stopped: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	stop()
	return <-runErr
}

// gen makes the messages ingest would publish, in the field shapes of the hosted examples.
type gen struct {
	org string
	at  float64 // advances a second per trail
}

func (g *gen) envelope(kind contract.Kind, id string) *contract.Envelope {
	return &contract.Envelope{ID: id, Kind: kind, OrgID: g.org, At: g.at,
		Actor: contract.Actor{KeyID: "fill", Name: "ci-pipelines"}}
}

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fill: encode %T: %v", v, err)) // plain maps always encode
	}
	return b
}

func (g *gen) flow(f int) *contract.Envelope {
	e := g.envelope(contract.KindFlowUpserted, idOf("flow-msg", f))
	e.Flow = &contract.FlowUpsert{ID: idOf("flow", f), Name: FlowName(f), Description: "Build and test of service " + fmt.Sprint(f),
		Visibility: "private", Template: "version: 1\n", TemplateID: idOf("template", f)}
	return e
}

func repoInfo(f int) map[string]any {
	return map[string]any{"id": fmt.Sprint(189528148 + f), "name": fmt.Sprintf("acme/service-%02d", f),
		"url": fmt.Sprintf("https://github.com/acme/service-%02d", f), "provider": "github"}
}

func commitInfo(i int) map[string]any {
	f := i % Flows
	return map[string]any{"sha1": TrailName(i), "message": fmt.Sprintf("Merge pull request #%d from acme/feature-%d", i, i),
		"author": "Jane Doe <jane@example.com>", "branch": "main", "timestamp": 1.7775476e9 + float64(i),
		"url": fmt.Sprintf("https://github.com/acme/service-%02d/commit/%s", f, TrailName(i))}
}

// trail is what one pipeline run reports: the trail, its artifact, and ten attestations.
func (g *gen) trail(i int) []*contract.Envelope {
	g.at++
	f := i % Flows
	flowID, name, fp := idOf("flow", f), TrailName(i), Fingerprint(i)
	out := make([]*contract.Envelope, 0, 2+AttestationsPerTrail)
	b := g.envelope(contract.KindTrailBegun, idOf("trail-msg", i))
	origin := fmt.Sprintf("https://github.com/acme/service-%02d/actions/runs/%d", f, 25162274003+i)
	desc := ""
	b.Trail = &contract.TrailBegin{ID: idOf("trail", i), FlowID: flowID, Name: name, Description: &desc,
		GitCommitInfo: raw(commitInfo(i)), RepoInfo: raw(repoInfo(f)), OriginURL: &origin, UserData: raw(map[string]any{})}
	out = append(out, b)

	a := g.envelope(contract.KindArtifactReported, idOf("artifact-msg", i))
	svc := fmt.Sprintf("service-%02d", f)
	a.Artifact = &contract.ArtifactReport{ID: idOf("artifact", i), FlowID: flowID, TrailName: name, Fingerprint: fp,
		TemplateName: svc, Report: raw(map[string]any{"fingerprint": fp, "filename": fmt.Sprintf("ghcr.io/acme/%s:%s", svc, name[:7]),
			"git_commit": name, "build_url": origin, "commit_url": commitInfo(i)["url"], "repo_info": repoInfo(f),
			"git_commit_info": commitInfo(i), "template_reference_name": svc, "trail_name": name})}
	out = append(out, a)

	att := func(k int, attName, typ string, onArtifact bool, data map[string]any) {
		e := g.envelope(contract.KindAttestationReported, idOf(fmt.Sprintf("attestation-msg-%d", k), i))
		in := &contract.AttestationInput{ID: idOf(fmt.Sprintf("attestation-%d", k), i), FlowID: flowID, TrailName: name,
			Name: attName, Type: typ, IsCompliant: i%50 != 7 || k != 3, Data: raw(data)}
		if onArtifact {
			in.ArtifactFingerprint, in.TargetArtifact = fp, svc
		}
		e.Attestation = in
		out = append(out, e)
	}
	common := func(extra map[string]any) map[string]any {
		m := map[string]any{"origin_url": origin, "git_commit_info": commitInfo(i), "user_data": map[string]any{}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	att(0, "pull-request", "pull_request", false, common(map[string]any{"pull_requests": []any{map[string]any{
		"url": fmt.Sprintf("https://github.com/acme/%s/pull/%d", svc, i), "state": "MERGED", "author": "jdoe",
		"created_at": 1.7775e9 + float64(i), "merged_at": 1.7775e9 + float64(i) + 3600,
		"approvers": []any{map[string]any{"username": "asmith", "state": "APPROVED", "timestamp": 1.7775e9 + float64(i) + 1800}},
		"commits":   []any{map[string]any{"sha1": name, "message": "Update base image", "author": "jdoe", "branch": "main"}}}}}))
	for k, n := range []string{"unit-test", "integration-test", "rubocop-lint"} {
		att(1+k, n, "junit", true, common(map[string]any{"junit_results": []any{map[string]any{
			"name": n, "tests": 120 + k, "failures": 0, "errors": 0, "skipped": 2, "duration": 12.5}}}))
	}
	att(4, "snyk-container-scan", "snyk", true, common(map[string]any{"snyk_results": map[string]any{
		"schema_version": 1, "tool": map[string]any{"name": "Snyk Container", "version": "1.1296.2"},
		"results": []any{map[string]any{"low_count": 0, "medium_count": 0, "high_count": 0}}}}))
	att(5, "provenance-attestation", "generic", true, common(map[string]any{"attestation_data": map[string]any{"builder": "github-actions"}}))
	att(6, "sbom", "generic", true, common(map[string]any{"attestation_data": map[string]any{"format": "cyclonedx", "components": 212}}))
	att(7, "unit-test-metrics", "custom:test-metrics", true, common(map[string]any{"attestation_data": map[string]any{
		"total": 120, "passed": 118, "failed": 0, "skipped": 2}}))
	att(8, "unit-test-coverage-metrics", "custom:coverage-metrics", true, common(map[string]any{"attestation_data": map[string]any{
		"lines": 0.91, "branches": 0.84}}))
	att(9, "integration-test-metrics", "custom:test-metrics", true, common(map[string]any{"attestation_data": map[string]any{
		"total": 40, "passed": 40, "failed": 0, "skipped": 0}}))
	return out
}

func (g *gen) environment(e int) *contract.Envelope {
	typ := "K8S"
	if e%3 == 2 {
		typ = "ECS"
	}
	env := g.envelope(contract.KindEnvironmentUpserted, idOf("env-msg", e))
	env.Environment = &contract.EnvironmentUpsert{ID: idOf("env", e), Name: EnvName(e), Type: typ,
		Description: "Production cluster " + fmt.Sprint(e)}
	return env
}

// snapshot reports environment e running n artifacts, the newest built before trail upto.
func (g *gen) snapshot(e, upto, n int) *contract.Envelope {
	typ := "K8S"
	if e%3 == 2 {
		typ = "ECS"
	}
	s := g.envelope(contract.KindSnapshotReported, idOf(fmt.Sprintf("snapshot-%d", e), upto))
	rep := &contract.SnapshotReport{EnvID: idOf("env", e), Type: typ}
	for k := range min(n, upto) {
		i := upto - 1 - (k*7+e)%min(upto, 5*n) // recent builds, a different mix per environment
		svc := fmt.Sprintf("service-%02d", i%Flows)
		inst := contract.RunningInstance{Name: fmt.Sprintf("ghcr.io/acme/%s:%s", svc, TrailName(i)[:7]), Fingerprint: Fingerprint(i),
			CreationTimestamp: g.at - 60}
		if typ == "K8S" {
			inst.Context = map[string]any{"namespace": "prod", "podName": fmt.Sprintf("%s-%d-7d9f", svc, k)}
		} else {
			inst.Context = map[string]any{"cluster": "prod", "serviceName": svc, "taskArn": fmt.Sprintf("arn:aws:ecs:eu-west-1:1:task/prod/%d", k)}
		}
		rep.Instances = append(rep.Instances, inst)
	}
	s.Snapshot = rep
	return s
}
