package app

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/bus/kafkabus/kafkatest"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// readAfterWriteTemplate asks for a generic attestation "tests" on the artifact "app".
const readAfterWriteTemplate = "version: 1\ntrail:\n  artifacts:\n  - name: app\n    attestations:\n    - name: tests\n      type: generic\n"

// TestReadAfterWriteForEveryClient: a read that starts after a 201 reflects that write whoever
// reads: another key of the organization (a deploy job after a build job), or an anonymous
// reader of a public organization. No waiting in the test: each read comes right after the 201.
func TestReadAfterWriteForEveryClient(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		writer := e.k
		reader := keyFor(t, e, testOrg, "deploy", store.RoleMember)
		if err := e.store.SetOrgPublic(context.Background(), mustOrg(t, e.store, testOrg).ID, true); err != nil {
			t.Fatal(err)
		}
		anon := newKosli(t, e.base+"/api/v2", "")

		// A flow created with one key is there for the others at once.
		for i := range 5 {
			name := fmt.Sprintf("flow-%d", i)
			writer.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": name, "description": ""},
				file{"template_file", "t.yml", []byte(readAfterWriteTemplate)}).want(t, http.StatusCreated)
			reader.get("/flows/"+testOrg+"/"+name).want(t, http.StatusOK)
			writer.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": name + "-public", "description": ""},
				file{"template_file", "t.yml", []byte(readAfterWriteTemplate)}).want(t, http.StatusCreated)
			anon.get("/flows/"+testOrg+"/"+name+"-public").want(t, http.StatusOK)
		}
		// ...and a trail begun by another key right after finds the flow.
		reader.multipart(http.MethodPut, "/trails/"+testOrg+"/flow-0", "data_json", map[string]any{"name": "t1"}).want(t, http.StatusCreated)
		writer.send(http.MethodPost, "/artifacts/"+testOrg+"/flow-0", map[string]any{"fingerprint": fpBackend, "filename": "app",
			"build_url": "b", "commit_url": "c", "trail_name": "t1"}).want(t, http.StatusCreated)

		// Each attestation flips the artifact's compliance: the deploy job's assert, right after
		// the build job's 201, sees it, as do the attestation list and an anonymous reader.
		assert := "/asserts/" + testOrg + "/fingerprint/" + fpBackend
		for i := range 20 {
			compliant := i%2 == 0
			writer.multipart(http.MethodPost, "/attestations/"+testOrg+"/flow-0/trail/t1/generic", "data_json",
				map[string]any{"attestation_name": "tests", "artifact_fingerprint": fpBackend, "is_compliant": compliant}).
				want(t, http.StatusCreated)
			if res := reader.get(assert).want(t, http.StatusOK).JSON(t); res["compliant"] != compliant {
				t.Fatalf("attestation %d (compliant %v): another key's assert right after the 201 answers %v", i, compliant, res)
			}
			if got := reader.get("/attestations/"+testOrg+"/flow-0/trail/t1/tests").want(t, http.StatusOK).Array(t); len(got) != i+1 {
				t.Fatalf("attestation %d: another key lists %d of them", i, len(got))
			}
			if res := anon.get("/artifacts/"+testOrg+"/flow-0/fingerprint/"+fpBackend).want(t, http.StatusOK).JSON(t); res["is_compliant"] != compliant {
				t.Fatalf("attestation %d (compliant %v): an anonymous reader gets the artifact %v", i, compliant, res)
			}
		}
	})
}

// startTwoIngests starts the distributed mode with one evaluate tier and two ingest tiers on
// one PostgreSQL schema and Kafka cluster, as behind a load balancer, and returns their config.
func startTwoIngests(t *testing.T) (Config, *Running, *Running) {
	t.Helper()
	cfg, _, a, b := startTwoIngestsWith(t, func(*Config) {})
	return cfg, a, b
}

// startTwoIngestsWith is startTwoIngests with the config adjusted first; it returns the
// evaluate tier too.
func startTwoIngestsWith(t *testing.T, adjust func(*Config)) (cfg Config, evaluator, a, b *Running) {
	t.Helper()
	cfg = baseConfig()
	cfg.Postgres = postgresSchema(t)
	cfg.Kafka = kafkabus.Config{Brokers: kafkatest.NewCluster(t, 4), Partitions: 4}
	adjust(&cfg)
	evaluator = startTier(t, cfg, StartEvaluate)
	a, b = startTier(t, cfg, StartIngest), startTier(t, cfg, StartIngest)
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	return cfg, evaluator, a, b
}

// startTier starts one tier of the distributed mode, closed when the test ends.
func startTier(t *testing.T, cfg Config, start func(context.Context, Config) (*Running, error)) *Running {
	t.Helper()
	r, err := start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// seedAppAndOther makes the flows "app" and "other", each with a trail "t1", and reports the
// artifact fpBackend in app's trail with a compliant "tests" attestation.
func seedAppAndOther(t *testing.T, k *kosli) {
	t.Helper()
	for _, flow := range []string{"app", "other"} {
		k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": flow, "description": ""},
			file{"template_file", "t.yml", []byte(readAfterWriteTemplate)}).want(t, http.StatusCreated)
		k.multipart(http.MethodPut, "/trails/"+testOrg+"/"+flow, "data_json", map[string]any{"name": "t1"}).want(t, http.StatusCreated)
	}
	k.send(http.MethodPost, "/artifacts/"+testOrg+"/app", map[string]any{"fingerprint": fpBackend, "filename": "app",
		"build_url": "b", "commit_url": "c", "trail_name": "t1"}).want(t, http.StatusCreated)
	k.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
		map[string]any{"attestation_name": "tests", "artifact_fingerprint": fpBackend, "is_compliant": true}).want(t, http.StatusCreated)
}

// TestReadAfterWriteAcrossIngestProcesses: in the distributed mode with two ingest processes, a
// read at one sees what the other answered 201 for, right after the 201: a flow, a trail begun
// there, the attestations and the assert of an artifact whose compliance each one flips.
func TestReadAfterWriteAcrossIngestProcesses(t *testing.T) {
	cfg, a, b := startTwoIngests(t)
	writer := newKosli(t, "http://"+a.Addr+"/api/v2", testToken)
	reader := keyFor(t, env{base: "http://" + b.Addr, store: b.Store}, testOrg, "deploy", store.RoleMember)

	for i := range 5 {
		name := fmt.Sprintf("flow-%d", i)
		writer.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": name, "description": ""},
			file{"template_file", "t.yml", []byte(readAfterWriteTemplate)}).want(t, http.StatusCreated)
		reader.get("/flows/"+testOrg+"/"+name).want(t, http.StatusOK)
	}
	writer.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": "app", "description": ""},
		file{"template_file", "t.yml", []byte(readAfterWriteTemplate)}).want(t, http.StatusCreated)
	reader.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "t1"}).want(t, http.StatusCreated)
	writer.send(http.MethodPost, "/artifacts/"+testOrg+"/app", map[string]any{"fingerprint": fpBackend, "filename": "app",
		"build_url": "b", "commit_url": "c", "trail_name": "t1"}).want(t, http.StatusCreated)
	assert := "/asserts/" + testOrg + "/fingerprint/" + fpBackend
	for i := range 20 {
		compliant := i%2 == 0
		writer.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
			map[string]any{"attestation_name": "tests", "artifact_fingerprint": fpBackend, "is_compliant": compliant}).
			want(t, http.StatusCreated)
		if res := reader.get(assert).want(t, http.StatusOK).JSON(t); res["compliant"] != compliant {
			t.Fatalf("attestation %d (compliant %v) through ingest A: the assert through ingest B answers %v", i, compliant, res)
		}
		if got := reader.get("/attestations/"+testOrg+"/app/trail/t1/tests").want(t, http.StatusOK).Array(t); len(got) != i+1 {
			t.Fatalf("attestation %d through ingest A: ingest B lists %d of them", i, len(got))
		}
		tr := reader.get("/trails/"+testOrg+"/app/t1").want(t, http.StatusOK).JSON(t)
		art, _ := tr["compliance_status"].(map[string]any)["artifacts_statuses"].(map[string]any)[fpBackend].(map[string]any)
		if art["is_compliant"] != compliant {
			t.Fatalf("attestation %d (compliant %v) through ingest A: the trail through ingest B has the artifact %v", i, compliant, art)
		}
	}
	// Those reads waited for the evaluator's recorded positions to reach the end of the bus.
	offsets, err := kafkabus.NewOffsets(cfg.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer offsets.Close()
	ends, err := offsets.End(context.Background(), contract.TopicEvidence)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := b.Store.Positions(context.Background(), contract.TopicEvidence)
	if err != nil {
		t.Fatal(err)
	}
	for part, end := range ends {
		if pos[part] != end {
			t.Fatalf("applied positions %v, bus ends %v", pos, ends)
		}
	}
}

// TestAssertWaitsOnlyForWhatItReads: an assert waits for the writes acknowledged before it that
// can change its answer (its artifact's trails, the environment it is judged in, writes of no
// scope) and for no other write of the organization: a deploy gate is not held back by other
// pipelines' evidence. The evaluator is held, so a wait lasts until the test releases it.
func TestAssertWaitsOnlyForWhatItReads(t *testing.T) {
	cfg := baseConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ingest.ConsistencyWait = time.Hour // a wrong wait hangs the test instead of serving stale
	r, err := StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	k := newKosli(t, "http://"+r.Addr+"/api/v2", testToken)
	seedAppAndOther(t, k)
	k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "server"}).want(t, http.StatusCreated)
	running := []map[string]any{{"digests": map[string]string{"app": fpBackend}, "creationTimestamp": 1}}
	k.send(http.MethodPut, "/environments/"+testOrg+"/prod/report/server", map[string]any{"artifacts": running}).want(t, http.StatusCreated)
	flowScope, envScope := "/asserts/"+testOrg+"/fingerprint/"+fpBackend, "/asserts/"+testOrg+"/fingerprint/"+fpBackend+"?environment_name=prod"
	if res := k.get(flowScope).want(t, http.StatusOK).JSON(t); res["compliant"] != true {
		t.Fatalf("assert before the restart: %v", res)
	}
	// A read of the whole organization waits for every write: nothing is left for the restart,
	// whose backlog (of no known scope) every read would wait for.
	k.get("/flows/"+testOrg).want(t, http.StatusOK)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	hold := make(chan struct{})
	cfg.holdEvaluator = hold
	if r, err = StartEmbedded(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	k = newKosli(t, "http://"+r.Addr+"/api/v2", testToken)
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	tracker := r.API.Tracker()
	// assertAsync asserts in the background; the test then sees it either answer or wait.
	assertAsync := func(path string) <-chan reply {
		c := make(chan reply, 1)
		go func() { c <- k.get(path) }()
		return c
	}
	answersAtOnce := func(what, path string) {
		t.Helper()
		c := assertAsync(path)
		var got reply
		eventually(t, what+" to answer or wait", func() bool {
			select {
			case got = <-c:
				return true
			default:
				return tracker.Waiting() > 0
			}
		})
		if got.Status == 0 {
			t.Fatalf("%s waited for a write it does not read", what)
		}
		got.want(t, http.StatusOK)
	}
	waits := func(what, path string, n int) <-chan reply {
		t.Helper()
		c := assertAsync(path)
		eventually(t, what+" to wait", func() bool { return tracker.Waiting() == n })
		return c
	}

	// Another pipeline's evidence, never applied while held: no assert of the artifact waits.
	k.multipart(http.MethodPost, "/attestations/"+testOrg+"/other/trail/t1/generic", "data_json",
		map[string]any{"attestation_name": "tests", "is_compliant": false}).want(t, http.StatusCreated)
	answersAtOnce("a flow-scope assert", flowScope)
	answersAtOnce("an environment-scope assert", envScope)
	answersAtOnce("a flow-scope assert answered from memory", flowScope)

	// A snapshot of the environment: the environment-scope assert waits, the flow-scope one not.
	k.send(http.MethodPut, "/environments/"+testOrg+"/prod/report/server", map[string]any{"artifacts": []any{}}).want(t, http.StatusCreated)
	answersAtOnce("a flow-scope assert after a snapshot", flowScope)
	envReply := waits("an environment-scope assert after a snapshot", envScope, 1)

	// Evidence of the artifact's trail: the flow-scope assert waits, and sees it once applied.
	k.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
		map[string]any{"attestation_name": "tests", "artifact_fingerprint": fpBackend, "is_compliant": false}).want(t, http.StatusCreated)
	flowReply := waits("a flow-scope assert after evidence of its trail", flowScope, 2)
	close(hold)
	(<-envReply).want(t, http.StatusOK)
	if res := (<-flowReply).want(t, http.StatusOK).JSON(t); res["compliant"] != false {
		t.Fatalf("the assert that waited for the artifact's evidence answers %v", res)
	}
}

// TestAssertAcrossIngestsWaitsOnlyForWhatItReads: in the distributed mode, an assert at one
// ingest process waits for what another acknowledged only when it can change the answer: with
// no evaluator running, evidence of another pipeline's trail at ingest A holds no assert at
// ingest B, while evidence of the artifact's own trail does, until an evaluator applies it.
func TestAssertAcrossIngestsWaitsOnlyForWhatItReads(t *testing.T) {
	cfg, evaluator, a, b := startTwoIngestsWith(t, func(cfg *Config) {
		cfg.Ingest.ConsistencyWait = time.Hour // a wrong wait hangs the test instead of serving stale
	})
	writer := newKosli(t, "http://"+a.Addr+"/api/v2", testToken)
	reader := keyFor(t, env{base: "http://" + b.Addr, store: b.Store}, testOrg, "deploy", store.RoleMember)
	seedAppAndOther(t, writer)
	assert := "/asserts/" + testOrg + "/fingerprint/" + fpBackend
	if res := reader.get(assert).want(t, http.StatusOK).JSON(t); res["compliant"] != true {
		t.Fatalf("assert with the evaluator running: %v", res)
	}
	// Once A's writes so far are visible, its marks go (after a linger): only what it writes
	// from here on is in flight.
	orgID := mustOrg(t, b.Store, testOrg).ID
	eventually(t, "ingest A's marks to go", func() bool {
		marks, err := b.Store.InFlight(context.Background(), orgID)
		return err == nil && len(marks) == 0
	})
	if err := evaluator.Close(); err != nil {
		t.Fatal(err)
	}

	// Another pipeline's evidence, acknowledged at A and never applied: B's assert answers.
	writer.multipart(http.MethodPost, "/attestations/"+testOrg+"/other/trail/t1/generic", "data_json",
		map[string]any{"attestation_name": "tests", "is_compliant": false}).want(t, http.StatusCreated)
	if res := reader.get(assert).want(t, http.StatusOK).JSON(t); res["compliant"] != true {
		t.Fatalf("assert after another trail's evidence: %v", res)
	}
	// Evidence of the artifact's trail at A: B's assert waits for it, and sees it once applied.
	writer.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
		map[string]any{"attestation_name": "tests", "artifact_fingerprint": fpBackend, "is_compliant": false}).want(t, http.StatusCreated)
	answer := make(chan reply, 1)
	go func() { answer <- reader.get(assert) }()
	startTier(t, cfg, StartEvaluate)
	if res := (<-answer).want(t, http.StatusOK).JSON(t); res["compliant"] != false {
		t.Fatalf("the assert that waited for the artifact's evidence answers %v", res)
	}
}
