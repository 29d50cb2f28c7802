package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/notify/catalog"
	"github.com/veritrail/veritrail/plugins/builtin/webhook"
	"github.com/veritrail/veritrail/plugins/sdk"
	"github.com/veritrail/veritrail/plugins/sdk/plugintest"
)

// deliveryWait bounds every wait for a notification: generous for a loaded machine, and only
// ever reached when something is broken.
const deliveryWait = 60 * time.Second

// received is one request that reached a receiver.
type received struct {
	header http.Header
	body   []byte
}

// receiver is an HTTP endpoint that answers status (200 unless told otherwise) and passes on
// what it accepted.
type receiver struct {
	url    string
	got    chan received
	status atomic.Int32
	failed atomic.Int32 // requests answered with another status
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{got: make(chan received, 64)}
	r.status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if st := int(r.status.Load()); st != http.StatusOK {
			r.failed.Add(1)
			w.WriteHeader(st)
			return
		}
		r.got <- received{header: req.Header.Clone(), body: body}
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// next waits for the next value of ch.
func next[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deliveryWait):
		t.Fatalf("no %s within %v", what, deliveryWait)
	}
	var zero T
	return zero
}

// eventually polls cond until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(deliveryWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, deliveryWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func payloadOf(t *testing.T, r received) sdk.Payload {
	t.Helper()
	var p sdk.Payload
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("payload %s: %v", r.body, err)
	}
	return p
}

const notificationsPath = "/organizations/" + testOrg + "/environments_notifications"

func createRule(t *testing.T, k *kosli, body map[string]any) map[string]any {
	t.Helper()
	return k.send(http.MethodPost, notificationsPath, body).want(t, http.StatusCreated).JSON(t)
}

func getRule(t *testing.T, k *kosli, number any) map[string]any {
	t.Helper()
	return k.get(fmt.Sprintf("%s/%v", notificationsPath, number)).want(t, http.StatusOK).JSON(t)
}

// notifyFixture is a flow with artifact fpWeb reported and a K8S environment prod.
func notifyFixture(t *testing.T, k *kosli) {
	t.Helper()
	setupFlow(t, k)
	k.send(http.MethodPost, "/artifacts/"+testOrg+"/app", map[string]any{"fingerprint": fpWeb, "filename": "web:1",
		"build_url": "b", "commit_url": "c", "trail_name": "t1"}).want(t, http.StatusCreated)
	k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "K8S"}).want(t, http.StatusCreated)
}

var (
	fpWeb = strings.Repeat("a", 64)
	fpAPI = strings.Repeat("b", 64)
)

func reportProd(t *testing.T, k *kosli, items ...map[string]any) {
	t.Helper()
	k.send(http.MethodPut, "/environments/"+testOrg+"/prod/report/K8S", map[string]any{"artifacts": items}).want(t, http.StatusCreated)
}

// TestNotificationRules: the rules' API. Numbers count up per organization and are never given
// again, secrets are never shown, bad rules are 400s naming the field, and what could not be
// delivered is shown to admins.
func TestNotificationRules(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		notifyFixture(t, k)
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "staging", "type": "K8S"}).want(t, http.StatusCreated)
		hook, gone := newReceiver(t), newReceiver(t)
		gone.status.Store(http.StatusNotFound)

		first := createRule(t, k, map[string]any{"name": "prod watch", "environments": []string{"prod"},
			"triggers": []string{"ON_EXITED_ARTIFACT"},
			"targets": []map[string]any{{"type": "WEBHOOK", "webhook": hook.url, "secret": "s3cret-value"},
				{"type": "SLACK", "webhook": hook.url + "/slack", "context": map[string]string{"channel_id": "C1"}}}})
		targets := first["targets"].([]any)
		t0, t1 := targets[0].(map[string]any), targets[1].(map[string]any)
		if first["number"] != float64(1) || first["type"] != "ENV" || first["created_by"] == "" || first["is_failing"] != nil ||
			t0["has_secret"] != true || t1["has_secret"] != false || t0["id"] == t1["id"] || t0["webhook"] != hook.url ||
			t1["context"].(map[string]any)["channel_id"] != "C1" {
			t.Fatalf("created rule: %v", first)
		}
		second := createRule(t, k, map[string]any{"name": "staging", "environments": []string{"staging"},
			"triggers": []string{"ON_STARTED_ARTIFACT"}, "targets": []map[string]any{{"type": "EMAIL", "emails": []string{"ops@example.com"}}}})
		if second["number"] != float64(2) {
			t.Fatalf("second rule: %v", second)
		}
		for _, path := range []string{notificationsPath, "/actions/" + testOrg, notificationsPath + "/1"} {
			if r := k.get(path).want(t, http.StatusOK); bytes.Contains(r.Body, []byte("s3cret-value")) {
				t.Fatalf("%s shows the secret: %s", path, r.Body)
			}
		}
		if list := k.get(notificationsPath).want(t, http.StatusOK).Array(t); len(list) != 2 {
			t.Fatalf("list: %v", list)
		}
		actions := k.get("/actions/"+testOrg).want(t, http.StatusOK).Array(t)
		if len(actions) != 2 || actions[1].(map[string]any)["flows"] == nil ||
			actions[1].(map[string]any)["environments"].([]any)[0] != "staging" {
			t.Fatalf("actions: %v", actions)
		}

		// Replace rule 2 with one whose receiver refuses (404), on prod's starts.
		updated := k.send(http.MethodPut, notificationsPath+"/2", map[string]any{"name": "prod starts", "environments": []string{"prod"},
			"triggers": []string{"ON_STARTED_ARTIFACT"}, "targets": []map[string]any{{"type": "WEBHOOK", "webhook": gone.url}}}).
			want(t, http.StatusOK).JSON(t)
		if updated["number"] != float64(2) || updated["name"] != "prod starts" || updated["created_at"] != second["created_at"] {
			t.Fatalf("updated rule: %v", updated)
		}
		reportProd(t, k, k8sItem("web-1", map[string]string{"web": fpWeb}, 100))
		var dead []any
		eventually(t, "a dead letter", func() bool {
			dead = k.get(notificationsPath+"/2/dead_letters").want(t, http.StatusOK).Array(t)
			return len(dead) == 1
		})
		d := dead[0].(map[string]any)
		payload, _ := d["payload"].(map[string]any)
		if d["reason"] != sdk.ReasonClientError || d["trigger"] != "ON_STARTED_ARTIFACT" || d["retryable"] != false ||
			payload["event"].(map[string]any)["artifact"].(map[string]any)["fingerprint"] != fpWeb {
			t.Fatalf("dead letter: %v", d)
		}
		r2 := getRule(t, k, 2)
		tgt := r2["targets"].([]any)[0].(map[string]any)
		if r2["is_failing"] != true || r2["last_failure_timestamp"] == nil || tgt["is_failing"] != true ||
			tgt["last_failure_reason"] != sdk.ReasonClientError {
			t.Fatalf("failing rule: %v", r2)
		}

		// Dead letters are for admins.
		ctx := context.Background()
		org := mustOrg(t, e.store, testOrg)
		if err := CreateOrgKey(ctx, e.store, org, "ci", store.RoleMember, "vt_member_key_0000000000000000000"); err != nil {
			t.Fatal(err)
		}
		member := newKosli(t, e.base+"/api/v2", "vt_member_key_0000000000000000000")
		member.get(notificationsPath+"/2").want(t, http.StatusOK)
		wantError(t, member.get(notificationsPath+"/2/dead_letters"), http.StatusForbidden, "admin", "")
		// The web UI shows the admin the delivery given up on, with why; a member sees the rule's
		// targets and their outcome, not its deliveries.
		admin := newBrowser(t, e.base)
		admin.signIn(testToken)
		if _, _, page := admin.get("/" + testOrg + "/notifications"); !strings.Contains(page, "Given up on") ||
			!strings.Contains(page, sdk.ReasonClientError) || !strings.Contains(page, gone.url) {
			t.Errorf("notifications page of an admin with a dead letter:\n%s", page)
		}
		viewer := newBrowser(t, e.base)
		viewer.signIn("vt_member_key_0000000000000000000")
		if _, _, page := viewer.get("/" + testOrg + "/notifications"); !strings.Contains(page, "prod starts") ||
			strings.Contains(page, "Recent deliveries") {
			t.Errorf("notifications page of a member:\n%s", page)
		}

		// A deleted rule is gone and its number is not given again.
		k.send(http.MethodDelete, notificationsPath+"/2", nil).want(t, http.StatusOK)
		wantError(t, k.get(notificationsPath+"/2"), http.StatusNotFound, "does not exist", "")
		wantError(t, k.send(http.MethodPut, notificationsPath+"/2", map[string]any{"name": "x", "environments": []string{"prod"},
			"triggers": []string{"ON_STARTED_ARTIFACT"}, "targets": []map[string]any{{"type": "WEBHOOK", "webhook": hook.url}}}),
			http.StatusNotFound, "does not exist", "")
		third := createRule(t, k, map[string]any{"name": "third", "environments": []string{"prod"},
			"triggers": []string{"ON_COMPLIANT_ENV"}, "targets": []map[string]any{{"type": "PLUGIN", "plugin": "pager"}}})
		if third["number"] != float64(3) {
			t.Fatalf("the rule after a deleted one: %v", third)
		}

		// Bad rules: every problem named.
		valid := func() map[string]any {
			return map[string]any{"name": "x", "environments": []string{"prod"}, "triggers": []string{"ON_STARTED_ARTIFACT"},
				"targets": []map[string]any{{"type": "WEBHOOK", "webhook": hook.url}}}
		}
		for field, change := range map[string]func(map[string]any){
			"triggers[0]":        func(b map[string]any) { b["triggers"] = []string{"ON_LUNCH"} },
			"environments[0]":    func(b map[string]any) { b["environments"] = []string{"nowhere"} },
			"targets":            func(b map[string]any) { b["targets"] = []map[string]any{} },
			"targets[0].webhook": func(b map[string]any) { b["targets"] = []map[string]any{{"type": "WEBHOOK"}} },
			"targets[0].secret": func(b map[string]any) {
				b["targets"] = []map[string]any{{"type": "SLACK", "webhook": hook.url, "secret": "x"}}
			},
			"targets[1]": func(b map[string]any) {
				b["targets"] = []map[string]any{{"type": "WEBHOOK", "webhook": hook.url}, {"type": "WEBHOOK", "webhook": hook.url}}
			},
			"name": func(b map[string]any) { b["name"] = "" },
		} {
			b := valid()
			change(b)
			wantError(t, k.send(http.MethodPost, notificationsPath, b), http.StatusBadRequest, "Input payload validation failed", field)
		}
		if list := k.get(notificationsPath).want(t, http.StatusOK).Array(t); len(list) != 2 {
			t.Fatalf("refused rules were created: %v", list)
		}
	})
}

// smtpMessage is one message a test SMTP server accepted.
type smtpMessage struct {
	to   []string
	data string
	tls  bool
}

type smtpSession struct {
	conn *smtp.Conn
	got  chan<- smtpMessage
	msg  smtpMessage
}

func (s *smtpSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.msg.to = append(s.msg.to, to)
	return nil
}
func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.msg.data = string(b)
	_, s.msg.tls = s.conn.TLSConnectionState()
	s.got <- s.msg
	return nil
}
func (s *smtpSession) Reset()        { s.msg = smtpMessage{} }
func (s *smtpSession) Logout() error { return nil }

// smtpServer is a real SMTP server on loopback that offers STARTTLS with a certificate of its
// own; it returns the e-mail notifier's settings for it and the messages it accepts.
func smtpServer(t *testing.T) (map[string]string, <-chan smtpMessage) {
	t.Helper()
	cert, certPEM := plugintest.SelfSignedCert(t)
	caFile := filepath.Join(t.TempDir(), "smtp-ca.pem")
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan smtpMessage, 64)
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{conn: c, got: got}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 30*time.Second, 30*time.Second
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return map[string]string{"host": "127.0.0.1", "port": port, "from": "Veritrail <veritrail@example.com>", "ca_file": caFile,
		"timeout": "20s"}, got
}

// examplePlugin builds plugins/example with the go command, as an author would, into a fresh
// plugin directory, and returns the directory and the binary's SHA-256.
func examplePlugin(t *testing.T) (dir, sum string) {
	t.Helper()
	dir = t.TempDir()
	bin := filepath.Join(dir, "pager")
	build := exec.Command("go", "build", "-o", bin, ".") // in its own module, as an author builds it
	build.Dir = "../../../plugins/example"
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./plugins/example: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return dir, hex.EncodeToString(h[:])
}

func pagerStatus(t *testing.T, c *catalog.Catalog) catalog.Status {
	t.Helper()
	for _, s := range c.Status() {
		if s.Name == "pager" {
			return s
		}
	}
	t.Fatal("the catalog has no pager plugin")
	return catalog.Status{}
}

// TestNotificationsReachEveryKindOfTarget: a snapshot's triggers reach a signed webhook, a
// Slack channel, an SMTP server over STARTTLS and the example plugin, in the order they
// happened; a plugin process that is killed is started again and the next message arrives.
func TestNotificationsReachEveryKindOfTarget(t *testing.T) {
	pluginDir, pluginSum := examplePlugin(t)
	mailSettings, mails := smtpServer(t)
	configure := func(cfg *Config) {
		cfg.Notify.Notifiers.File = catalog.File{PluginDir: pluginDir,
			Plugins:  []catalog.Entry{{Name: "pager", Command: "pager", SHA256: pluginSum, Settings: map[string]string{"allow_private": "true"}}},
			Builtins: map[string]map[string]string{"email": mailSettings}}
	}
	forEachModeWith(t, configure, func(t *testing.T, e env) {
		k := e.k
		notifyFixture(t, k)
		hook, chat, pager := newReceiver(t), newReceiver(t), newReceiver(t)
		rule := createRule(t, k, map[string]any{"name": "prod watch", "environments": []string{"prod"},
			"triggers": []string{"ON_STARTED_ARTIFACT", "ON_EXITED_ARTIFACT", "ON_SCALED_ARTIFACT", "ON_ALLOWED_ARTIFACT"},
			"targets": []map[string]any{
				{"type": "WEBHOOK", "webhook": hook.url + "/veritrail", "secret": "s3cret"},
				{"type": "SLACK", "webhook": chat.url, "context": map[string]string{"channel_id": "C0PS"}},
				{"type": "EMAIL", "emails": []string{"ops@example.com"}},
				{"type": "PLUGIN", "plugin": "pager", "webhook": pager.url + "/incidents", "context": map[string]string{"severity": "critical"}},
			}})
		number := rule["number"]

		// A start reaches every target.
		reportProd(t, k, k8sItem("web-1", map[string]string{"web": fpWeb}, 100))
		h := next(t, hook.got, "webhook request")
		if err := webhook.Verify([]byte("s3cret"), h.header.Get(webhook.HeaderSignature), h.body, time.Now(), time.Minute); err != nil {
			t.Fatalf("webhook signature: %v", err)
		}
		p := payloadOf(t, h)
		ev := p.Event
		if ev.Trigger != sdk.OnStartedArtifact || ev.Environment.Name != "prod" || ev.Snapshot == nil || ev.Snapshot.Index != 1 ||
			ev.Artifact == nil || ev.Artifact.Name != "web" || ev.Artifact.Fingerprint != fpWeb || ev.Artifact.InstancesNow != 1 ||
			len(ev.Artifact.Provenance) != 1 || ev.Artifact.Provenance[0].Flow != "app" || ev.Artifact.Provenance[0].Trail != "t1" ||
			p.Rule.Org != testOrg || float64(p.Rule.Number) != number || h.header.Get(webhook.HeaderDelivery) != p.DeliveryID ||
			!strings.HasPrefix(ev.Environment.HTMLURL, "http://veritrail.test/"+testOrg+"/environments/prod") {
			t.Fatalf("webhook payload: %s", h.body)
		}
		var slack struct {
			Text   string           `json:"text"`
			Blocks []map[string]any `json:"blocks"`
		}
		if err := json.Unmarshal(next(t, chat.got, "Slack message").body, &slack); err != nil || slack.Text != "web started running in prod" ||
			len(slack.Blocks) == 0 || slack.Blocks[0]["type"] != "header" {
			t.Fatalf("Slack message %+v, %v", slack, err)
		}
		m := next(t, mails, "e-mail")
		if !m.tls || len(m.to) != 1 || m.to[0] != "ops@example.com" || !strings.Contains(m.data, "Subject: [Veritrail] web started running in prod") {
			t.Fatalf("e-mail (STARTTLS %v) to %v:\n%s", m.tls, m.to, m.data)
		}
		var incident struct {
			DedupKey string `json:"dedup_key"`
			Summary  string `json:"summary"`
			Severity string `json:"severity"`
		}
		if err := json.Unmarshal(next(t, pager.got, "incident").body, &incident); err != nil || incident.Summary != "web started running in prod" ||
			incident.Severity != "critical" || incident.DedupKey == "" || incident.DedupKey == p.DeliveryID {
			t.Fatalf("incident %+v, %v", incident, err)
		}

		// The plugin process dies; the next trigger starts it again. It is killed once the
		// delivery is settled: killed earlier, the attempt may fail after the receiver took it,
		// and be sent again (at least once, with the same dedup key).
		eventually(t, "the first deliveries settled", func() bool {
			for _, tg := range getRule(t, k, number)["targets"].([]any) {
				if tg.(map[string]any)["last_success_at"] == nil {
					return false
				}
			}
			return true
		})
		st := pagerStatus(t, e.catalog)
		if !st.Running || st.PID == 0 || st.Starts != 1 {
			t.Fatalf("plugin status after its first delivery: %+v", st)
		}
		if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the plugin's death noticed", func() bool { return !pagerStatus(t, e.catalog).Running })

		// Scaling, then a replacement (a start and an exit in one snapshot).
		reportProd(t, k, k8sItem("web-1", map[string]string{"web": fpWeb}, 100), k8sItem("web-2", map[string]string{"web": fpWeb}, 110))
		if p := payloadOf(t, next(t, hook.got, "scaled")); p.Event.Trigger != sdk.OnScaledArtifact ||
			p.Event.Artifact.InstancesBefore != 1 || p.Event.Artifact.InstancesNow != 2 || p.Event.Snapshot.Index != 2 {
			t.Fatalf("scaled: %+v", p.Event)
		}
		if err := json.Unmarshal(next(t, pager.got, "incident after the restart").body, &incident); err != nil ||
			!strings.Contains(incident.Summary, "scaled from 1 to 2") {
			t.Fatalf("incident after the restart %+v, %v", incident, err)
		}
		if st := pagerStatus(t, e.catalog); !st.Running || st.Starts != 2 {
			t.Fatalf("plugin status after the restart: %+v", st)
		}
		reportProd(t, k, k8sItem("api-1", map[string]string{"api": fpAPI}, 120))
		var seen []string
		for range 2 {
			p := payloadOf(t, next(t, hook.got, "replacement"))
			seen = append(seen, string(p.Event.Trigger)+" "+p.Event.Artifact.Name)
		}
		if strings.Join(seen, ", ") != "ON_STARTED_ARTIFACT api, ON_EXITED_ARTIFACT web" {
			t.Fatalf("replacement triggers: %v", seen)
		}

		// Allowlisting.
		k.send(http.MethodPut, "/allowlists/"+testOrg+"/prod", map[string]any{"artifact_fingerprint": fpWeb, "artifact_name": "web",
			"description": "hotfix"}).want(t, http.StatusCreated)
		if p := payloadOf(t, next(t, hook.got, "allowed")); p.Event.Trigger != sdk.OnAllowedArtifact || p.Event.Artifact.Fingerprint != fpWeb ||
			p.Event.Artifact.Compliant == nil || !*p.Event.Artifact.Compliant || p.Event.Description != "hotfix" {
			t.Fatalf("allowed: %+v", p.Event)
		}
		for i := range 4 { // scaled, started, exited, allowed: each target got them all
			next(t, chat.got, fmt.Sprint("Slack message ", i+2))
			next(t, mails, fmt.Sprint("e-mail ", i+2))
			if i > 0 {
				next(t, pager.got, fmt.Sprint("incident ", i+2))
			}
		}

		eventually(t, "every target's success recorded", func() bool {
			r := getRule(t, k, number)
			for _, tg := range r["targets"].([]any) {
				if tg.(map[string]any)["last_success_at"] == nil {
					return false
				}
			}
			return r["is_failing"] == false && r["last_success_timestamp"] != nil
		})
		if len(hook.got) != 0 {
			t.Fatalf("the webhook got %d unexpected requests", len(hook.got))
		}
	})
}

// TestComplianceTriggersFireOncePerChange: whatever writes an environment's state (here the
// store itself, as policies will), a change fires its trigger once and no change fires nothing.
func TestComplianceTriggersFireOncePerChange(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "K8S"}).want(t, http.StatusCreated)
		hook := newReceiver(t)
		createRule(t, k, map[string]any{"name": "compliance", "environments": []string{"prod"},
			"triggers": []string{"ON_NON_COMPLIANT_ENV", "ON_COMPLIANT_ENV"}, "targets": []map[string]any{{"type": "WEBHOOK", "webhook": hook.url}}})
		ctx := context.Background()
		org := mustOrg(t, e.store, testOrg)
		setState := func(state bool) {
			t.Helper()
			err := e.store.Update(ctx, func(tx store.Tx) error {
				env, err := tx.EnvironmentByName(ctx, org.ID, "prod")
				if err != nil {
					return err
				}
				env.State = &state
				return tx.UpdateEnvironment(ctx, env)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []bool{false, false, true, true, false} {
			setState(s)
		}
		var fired []string
		for range 3 {
			p := payloadOf(t, next(t, hook.got, "compliance trigger"))
			if p.Event.Environment.Name != "prod" || p.Event.Environment.Compliant == nil {
				t.Fatalf("compliance event %+v", p.Event)
			}
			fired = append(fired, string(p.Event.Trigger))
		}
		// One environment's triggers are delivered in order, so a repeat would show up here.
		if want := "ON_NON_COMPLIANT_ENV ON_COMPLIANT_ENV ON_NON_COMPLIANT_ENV"; strings.Join(fired, " ") != want {
			t.Fatalf("fired %v, want %s", fired, want)
		}
		if v := k.get("/environments/"+testOrg+"/prod").want(t, http.StatusOK).JSON(t); v["state"] != false {
			t.Fatalf("environment state %v", v["state"])
		}
	})
}

// TestFailingReceiverRecovers: a receiver that answers 503 for a while makes its rule fail,
// then gets the message exactly once when it recovers, and the rule stops failing.
func TestFailingReceiverRecovers(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		notifyFixture(t, k)
		hook := newReceiver(t)
		hook.status.Store(http.StatusServiceUnavailable)
		rule := createRule(t, k, map[string]any{"name": "starts", "environments": []string{"prod"},
			"triggers": []string{"ON_STARTED_ARTIFACT"}, "targets": []map[string]any{{"type": "WEBHOOK", "webhook": hook.url}}})
		reportProd(t, k, k8sItem("web-1", map[string]string{"web": fpWeb}, 100))
		eventually(t, "the rule failing", func() bool {
			r := getRule(t, k, rule["number"])
			tg := r["targets"].([]any)[0].(map[string]any)
			return r["is_failing"] == true && tg["is_failing"] == true && tg["last_failure_reason"] == sdk.ReasonServerError &&
				r["last_success_timestamp"] == nil
		})
		// The web UI lists the delivery as retrying, with why.
		b := newBrowser(t, e.base)
		b.signIn(testToken)
		_, _, page := b.get("/" + testOrg + "/notifications")
		if !strings.Contains(page, "Recent deliveries (1)") || !strings.Contains(page, "Retrying") ||
			!strings.Contains(page, sdk.ReasonServerError) || !strings.Contains(page, "ON_STARTED_ARTIFACT") {
			t.Errorf("notifications page while the receiver fails:\n%s", page)
		}
		hook.status.Store(http.StatusOK)
		if p := payloadOf(t, next(t, hook.got, "the delivery after recovery")); p.Event.Trigger != sdk.OnStartedArtifact {
			t.Fatalf("delivered %+v", p.Event)
		}
		eventually(t, "the rule recovered", func() bool {
			r := getRule(t, k, rule["number"])
			return r["is_failing"] == false && r["last_success_timestamp"] != nil
		})
		if _, _, page := b.get("/" + testOrg + "/notifications"); !strings.Contains(page, "Recent deliveries (1)") ||
			!strings.Contains(page, "Delivered") || strings.Contains(page, "Retrying") {
			t.Errorf("notifications page after recovery:\n%s", page)
		}
		// The success is settled in the log: nothing is sent again.
		if len(hook.got) != 0 || hook.failed.Load() == 0 {
			t.Fatalf("after recovery: %d more deliveries, %d refused attempts", len(hook.got), hook.failed.Load())
		}
	})
}

// TestTamperedPluginIsRefused: a plugin binary that does not match its pin stops the notify
// tier from starting, in both modes, with an error that names both checksums.
func TestTamperedPluginIsRefused(t *testing.T) {
	dir, sum := examplePlugin(t)
	f, err := os.OpenFile(filepath.Join(dir, "pager"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("tampered")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cfg := baseConfig()
	cfg.DataDir = t.TempDir()
	cfg.Notify.Notifiers.File = catalog.File{PluginDir: dir, Plugins: []catalog.Entry{{Name: "pager", Command: "pager", SHA256: sum}}}
	for name, start := range map[string]func(context.Context, Config) (*Running, error){"serve": StartEmbedded, "notify": StartNotify} {
		r, err := start(context.Background(), cfg)
		if err == nil {
			r.Close()
			t.Fatalf("%s started with a tampered plugin", name)
		}
		if msg := err.Error(); !strings.Contains(msg, `plugin "pager"`) || !strings.Contains(msg, "refusing to run") || !strings.Contains(msg, sum) {
			t.Fatalf("%s: unclear error: %v", name, err)
		}
	}
}

// TestPolicyDecisionsFireComplianceTriggers: with a policy attached, the compliance the policy
// decides from snapshots fires ON_NON_COMPLIANT_ENV and ON_COMPLIANT_ENV, once per change.
func TestPolicyDecisionsFireComplianceTriggers(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		notifyFixture(t, k) // fpWeb is reported in flow app; fpAPI in no flow
		hook := newReceiver(t)
		createRule(t, k, map[string]any{"name": "compliance", "environments": []string{"prod"},
			"triggers": []string{"ON_NON_COMPLIANT_ENV", "ON_COMPLIANT_ENV"}, "targets": []map[string]any{{"type": "WEBHOOK", "webhook": hook.url}}})
		k.multipart(http.MethodPut, "/policies/"+testOrg, "payload", map[string]any{"name": "provenance", "type": "env"},
			file{"policy_file", "policy.yml", []byte("_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  provenance:\n    required: true\n")}).
			want(t, http.StatusCreated)
		k.send(http.MethodPost, "/environments/"+testOrg+"/prod/policies", map[string]any{"policy_names": []string{"provenance"}}).
			want(t, http.StatusOK)

		web := k8sItem("web-1", map[string]string{"web": fpWeb}, 100)
		unknown := k8sItem("api-1", map[string]string{"api": fpAPI}, 110)
		reportProd(t, k, web, unknown)                                                         // an artifact of no flow: not compliant
		reportProd(t, k, web, unknown, k8sItem("web-2", map[string]string{"web": fpWeb}, 120)) // still not
		reportProd(t, k, web)                                                                  // compliant
		var fired []string
		for range 2 {
			p := payloadOf(t, next(t, hook.got, "compliance trigger"))
			fired = append(fired, string(p.Event.Trigger))
		}
		if want := "ON_NON_COMPLIANT_ENV ON_COMPLIANT_ENV"; strings.Join(fired, " ") != want {
			t.Fatalf("fired %v, want %s", fired, want)
		}
		if v := k.get("/environments/"+testOrg+"/prod").want(t, http.StatusOK).JSON(t); v["state"] != true {
			t.Fatalf("environment state %v, want true", v["state"])
		}
		select {
		case r := <-hook.got:
			t.Fatalf("a further trigger: %s", r.body)
		case <-time.After(300 * time.Millisecond):
		}
	})
}
