package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/bus/kafkabus/kafkatest"
	"github.com/veritrail/veritrail/internal/bus/sqlitebus"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/template"
)

// A poison message is published straight onto the evidence topic, as a bug or an older ingest
// could have: ingest's validation is not what these tests rely on.

// busEnv is a running Veritrail and a publisher onto its evidence topic that bypasses ingest.
type busEnv struct {
	env
	publish func(t *testing.T, msgs ...*message.Message)
	// refused is an attestation of trail (flowID, name) that this mode's store refuses.
	refused func(t *testing.T, e busEnv, orgID, flowID, trail string) *contract.Envelope
}

type busMode struct {
	name  string
	start func(t *testing.T) busEnv
}

func busModes() []busMode {
	return []busMode{
		{"embedded", func(t *testing.T) busEnv {
			cfg := baseConfig()
			cfg.DataDir = t.TempDir()
			r, err := StartEmbedded(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			// Another publisher on the bus's database, as another process would have: the bus
			// finds its messages by polling.
			db, err := sqlitebus.Open(filepath.Join(cfg.DataDir, "bus.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			pub, err := sqlitebus.NewPublisher(db, sqlitebus.PublisherConfig{}, watermill.NopLogger{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pub.Close() })
			return busEnv{env: env{base: "http://" + r.Addr, store: r.Store}, publish: publishWith(pub), refused: duplicateAttestation}
		}},
		{"distributed", func(t *testing.T) busEnv {
			cfg := baseConfig()
			cfg.Postgres = postgresSchema(t)
			// One partition: every message of every organization waits behind one that blocks.
			cfg.Kafka = kafkabus.Config{Brokers: kafkatest.NewCluster(t, 1), Partitions: 1}
			for range 2 { // two evaluators, as operators run them
				ev, err := StartEvaluate(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ev.Close() })
			}
			in, err := StartIngest(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { in.Close() })
			pub, err := kafkabus.NewPublisher(cfg.Kafka, watermill.NopLogger{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pub.Close() })
			return busEnv{env: env{base: "http://" + in.Addr, store: in.Store}, publish: publishWith(pub), refused: nulAttestation}
		}},
	}
}

func forEachBusMode(t *testing.T, body func(t *testing.T, e busEnv)) {
	for _, m := range busModes() {
		t.Run(m.name, func(t *testing.T) {
			e := m.start(t)
			t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
			e.k = newKosli(t, e.base+"/api/v2", testToken)
			body(t, e)
		})
	}
}

func publishWith(pub message.Publisher) func(t *testing.T, msgs ...*message.Message) {
	return func(t *testing.T, msgs ...*message.Message) {
		t.Helper()
		for _, m := range msgs {
			if err := pub.Publish(contract.TopicEvidence, m); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// envelopeMessage is env as ingest publishes it.
func envelopeMessage(t *testing.T, env *contract.Envelope) *message.Message {
	t.Helper()
	env.Actor = contract.Actor{KeyID: "k", Name: "ci"}
	env.At = float64(time.Now().UnixMicro()) / 1e6
	b, err := contract.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	m := message.NewMessage(env.ID, b)
	m.Metadata.Set(contract.MetaPartitionKey, env.PartitionKey())
	m.Metadata.Set(contract.MetaKind, string(env.Kind))
	m.Metadata.Set(contract.MetaOrg, env.OrgID)
	return m
}

// nulAttestation carries a NUL in its name, which PostgreSQL refuses in text.
func nulAttestation(_ *testing.T, _ busEnv, orgID, flowID, trail string) *contract.Envelope {
	return &contract.Envelope{ID: watermill.NewUUID(), Kind: contract.KindAttestationReported, OrgID: orgID,
		Request: &contract.Request{Operation: "attest_generic", Target: "/attestations/x"},
		Attestation: &contract.AttestationInput{ID: watermill.NewUUID(), FlowID: flowID, TrailName: trail, Name: "nul\x00name",
			Type: "generic", IsCompliant: true, Data: json.RawMessage(`{}`)}}
}

// duplicateAttestation reuses the ID of an attestation of the trail, which the store's UNIQUE
// constraint refuses (SQLite stores a NUL).
func duplicateAttestation(t *testing.T, e busEnv, orgID, flowID, trail string) *contract.Envelope {
	t.Helper()
	ctx := context.Background()
	tr, err := e.store.TrailByName(ctx, flowID, trail)
	if err != nil {
		t.Fatal(err)
	}
	atts, err := e.store.TrailAttestations(ctx, tr.ID)
	if err != nil || len(atts) == 0 {
		t.Fatalf("the trail needs an attestation to copy: %v %v", atts, err)
	}
	env := nulAttestation(t, e, orgID, flowID, trail)
	env.Attestation.ID, env.Attestation.Name = atts[0].ID, "duplicate"
	return env
}

// TestPoisonMessageDoesNotBlock: a message the store refuses and a payload that is no message,
// published onto the topic ahead of other writes of the same partition (of the same trail and
// of another organization), are set aside; the writes behind them apply; an admin sees the
// rejected messages with their reasons and payloads, another organization does not.
func TestPoisonMessageDoesNotBlock(t *testing.T) {
	forEachBusMode(t, func(t *testing.T, e busEnv) {
		ctx := context.Background()
		setupFlow(t, e.k)
		e.k.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
			map[string]any{"attestation_name": "tests"}).want(t, http.StatusCreated)
		e.k.get("/attestations/"+testOrg+"/app/trail/t1/tests").want(t, http.StatusOK)
		acme := mustOrg(t, e.store, testOrg)
		flow, err := e.store.FlowByName(ctx, acme.ID, "app")
		if err != nil {
			t.Fatal(err)
		}

		bad := e.refused(t, e, acme.ID, flow.ID, "t1")
		garbage := message.NewMessage(watermill.NewUUID(), []byte("\x00\xffnot an envelope"))
		garbage.Metadata.Set(contract.MetaOrg, acme.ID)
		garbage.Metadata.Set(contract.MetaPartitionKey, bad.PartitionKey())
		e.publish(t, envelopeMessage(t, bad), garbage)

		// Behind them: the same trail, and another organization's new flow and trail.
		e.k.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
			map[string]any{"attestation_name": "after"}).want(t, http.StatusCreated)
		beta := keyFor(t, e.env, "beta", "admin", store.RoleAdmin)
		beta.multipart(http.MethodPut, "/flows/beta/template_file", "data_json", map[string]any{"name": "svc"},
			file{"template_file", "t.yml", []byte(simpleTemplate)}).want(t, http.StatusCreated)
		beta.multipart(http.MethodPut, "/trails/beta/svc", "data_json", map[string]any{"name": "b1"}).want(t, http.StatusCreated)
		beta.multipart(http.MethodPost, "/attestations/beta/svc/trail/b1/generic", "data_json",
			map[string]any{"attestation_name": "tests"}).want(t, http.StatusCreated)

		// Read-your-writes waits for each; a blocked partition would leave them 404.
		e.k.get("/attestations/"+testOrg+"/app/trail/t1/after").want(t, http.StatusOK)
		beta.get("/attestations/beta/svc/trail/b1/tests").want(t, http.StatusOK)
		if a := e.k.get("/trails/" + testOrg + "/app/t1").JSON(t); !strings.Contains(fmt.Sprint(a), "after") {
			t.Errorf("trail t1 does not show the attestation behind the poison: %v", a)
		}

		list := e.k.get("/rejected-messages/"+testOrg).want(t, http.StatusOK).JSON(t)
		data, _ := list["data"].([]any)
		if pg, _ := list["pagination"].(map[string]any); len(data) != 2 || pg["total"] != float64(2) {
			t.Fatalf("rejected messages of %s: %v", testOrg, list)
		}
		undecodable, refused := data[0].(map[string]any), data[1].(map[string]any) // newest first
		wantReason := map[string]string{"embedded": "conflict", "distributed": "invalid byte sequence"}[strings.Split(t.Name(), "/")[1]]
		if refused["id"] != bad.ID || refused["kind"] != string(contract.KindAttestationReported) ||
			refused["class"] != "permanent" || refused["state"] != "rejected" || refused["partition_key"] != bad.PartitionKey() ||
			!strings.Contains(refused["reason"].(string), wantReason) {
			t.Errorf("the refused message: %v, want id %s and a reason with %q", refused, bad.ID, wantReason)
		}
		if p, _ := refused["payload"].(map[string]any); p["id"] != bad.ID || p["attestation"].(map[string]any)["name"] != bad.Attestation.Name {
			t.Errorf("the refused message's payload: %v", refused["payload"])
		}
		if undecodable["id"] != garbage.UUID || !strings.Contains(undecodable["reason"].(string), "decode envelope") ||
			!strings.Contains(fmt.Sprint(undecodable["payload"]), "not an envelope") {
			t.Errorf("the undecodable message: %v", undecodable)
		}
		one := e.k.get("/rejected-messages/"+testOrg+"/"+bad.ID).want(t, http.StatusOK).JSON(t)
		if one["reason"] != refused["reason"] {
			t.Errorf("get %s: %v", bad.ID, one)
		}
		wantError(t, e.k.get("/rejected-messages/"+testOrg+"/nope"), http.StatusNotFound, "Rejected message 'nope' does not exist", "")
		if other := beta.get("/rejected-messages/beta").want(t, http.StatusOK).JSON(t); len(other["data"].([]any)) != 0 {
			t.Errorf("beta sees rejected messages: %v", other)
		}
		wantError(t, beta.get("/rejected-messages/"+testOrg+"/"+bad.ID), http.StatusForbidden, "Access denied", "")
		member := keyFor(t, e.env, testOrg, "member", store.RoleMember)
		wantError(t, member.get("/rejected-messages/"+testOrg), http.StatusForbidden, "needs the admin privilege", "")

		// What `veritrail admin rejected-messages` prints.
		var out bytes.Buffer
		if err := ListRejected(ctx, e.store, &out, "", "", false); err != nil {
			t.Fatal(err)
		}
		if s := out.String(); !strings.Contains(s, bad.ID+"  "+testOrg+"  attestation.reported  rejected") ||
			!strings.Contains(s, wantReason) || !strings.Contains(s, garbage.UUID) || !strings.Contains(s, "(2 rejected messages)") {
			t.Errorf("admin rejected-messages:\n%s", s)
		}
		out.Reset()
		if err := ListRejected(ctx, e.store, &out, testOrg, store.StateRejected, true); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		var last RejectedLine
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || len(lines) != 2 || last.ID != bad.ID ||
			last.Org != testOrg || !strings.Contains(string(last.Payload), bad.ID) {
			t.Errorf("admin rejected-messages --json: %v\n%s", err, out.String())
		}
		out.Reset()
		if err := ListRejected(ctx, e.store, &out, "beta", "", false); err != nil || !strings.Contains(out.String(), "(0 rejected messages)") {
			t.Errorf("admin rejected-messages beta: %v\n%s", err, out.String())
		}

		// The refused write was answered 201: the audit log says it was rejected.
		audit := e.k.get("/audit/"+testOrg).want(t, http.StatusOK).JSON(t)
		if !strings.Contains(fmt.Sprint(audit["data"]), "id:"+bad.ID+" key_id:k operation:attest_generic outcome:rejected") {
			t.Errorf("audit log without the rejected write: %v", audit["data"])
		}
	})
}

// TestReplayRejectedMessage: a trail begun for a flow that did not exist yet (its flow arrived
// later, as it can across partitions) is rejected; after the flow exists an admin replays it,
// it applies once, and replaying again changes nothing. With two evaluators in the distributed
// mode.
func TestReplayRejectedMessage(t *testing.T) {
	forEachBusMode(t, func(t *testing.T, e busEnv) {
		acme := mustOrg(t, e.store, testOrg)
		flowID := watermill.NewUUID()
		begin := &contract.Envelope{ID: watermill.NewUUID(), Kind: contract.KindTrailBegun, OrgID: acme.ID,
			Request: &contract.Request{Operation: "beginTrail", Target: "/trails/acme/late"},
			Trail:   &contract.TrailBegin{ID: watermill.NewUUID(), FlowID: flowID, Name: "t-late"}}
		e.publish(t, envelopeMessage(t, begin))
		path := "/rejected-messages/" + testOrg + "/" + begin.ID
		r := eventuallyStatus(t, func() reply { return e.k.get(path) }, http.StatusOK).JSON(t)
		if r["state"] != "rejected" || !strings.Contains(r["reason"].(string), "not found") {
			t.Fatalf("the trail of a missing flow: %v", r)
		}

		tmpl, err := template.Parse([]byte(simpleTemplate))
		if err != nil {
			t.Fatal(err)
		}
		e.publish(t, envelopeMessage(t, &contract.Envelope{ID: watermill.NewUUID(), Kind: contract.KindFlowUpserted, OrgID: acme.ID,
			Flow: &contract.FlowUpsert{ID: flowID, Name: "late", Visibility: "private", Template: tmpl.Content, TemplateID: tmpl.ID}}))
		eventuallyStatus(t, func() reply { return e.k.get("/flows/" + testOrg + "/late") }, http.StatusOK)
		e.k.get("/trails/"+testOrg+"/late/t-late").want(t, http.StatusNotFound)

		if a := e.k.send(http.MethodPost, path+"/replay", nil).want(t, http.StatusAccepted).JSON(t); a["state"] != "replay_requested" {
			t.Fatalf("replay: %v", a)
		}
		waitState(t, e.k, path, "replayed")
		e.k.get("/trails/"+testOrg+"/late/t-late").want(t, http.StatusOK)
		events := func() int {
			tr, err := e.store.TrailByName(context.Background(), flowID, "t-late")
			if err != nil {
				t.Fatal(err)
			}
			ev, err := e.store.TrailEvents(context.Background(), tr.ID)
			if err != nil {
				t.Fatal(err)
			}
			return len(ev)
		}
		if n := events(); n != 1 {
			t.Fatalf("%d events of the replayed trail, want 1", n)
		}
		if a := e.k.send(http.MethodPost, path+"/replay", nil).want(t, http.StatusAccepted).JSON(t); a["state"] != "replayed" {
			t.Fatalf("a second replay request: %v, want it left replayed", a)
		}
		var out bytes.Buffer // and a third, as `veritrail admin replay` asks
		if err := ReplayRejected(context.Background(), e.store, &out, testOrg, begin.ID, time.Second); err != nil ||
			!strings.Contains(out.String(), "was replayed already") {
			t.Fatalf("admin replay of a replayed message: %v: %s", err, out.String())
		}
		if n := events(); n != 1 {
			t.Fatalf("%d events after a second replay request, want 1", n)
		}
		audit := e.k.get("/audit/"+testOrg).want(t, http.StatusOK).JSON(t)
		s := fmt.Sprint(audit["data"])
		if !strings.Contains(s, "id:"+begin.ID+" key_id:k operation:beginTrail outcome:applied") ||
			!strings.Contains(s, "operation:replayRejectedMessage outcome:applied") {
			t.Errorf("audit log: %v, want the replayed write applied and both replay requests", audit["data"])
		}
	})
}

// waitState reads the rejected message at path until it is in state.
func waitState(t *testing.T, k *kosli, path, state string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := k.get(path).want(t, http.StatusOK).JSON(t)
		if r["state"] == state {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v, want %s", path, r["state"], state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventuallyStatus repeats get until it answers status: for messages published straight onto the
// bus, which no ingest process tracks, so no read waits for them.
func eventuallyStatus(t *testing.T, get func() reply, status int) reply {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := get()
		if r.Status == status || time.Now().After(deadline) {
			return r.want(t, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
