package chat_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/plugins/builtin/chat"
	"github.com/veritrail/veritrail/plugins/sdk"
	"github.com/veritrail/veritrail/plugins/sdk/plugintest"
)

func configured(t *testing.T) sdk.Notifier {
	n := chat.New()
	if err := n.Configure(context.Background(), map[string]string{"allow_private": "true"}); err != nil {
		t.Fatal(err)
	}
	return n
}

// receiver records what it is posted and answers 200, as Slack and Teams do.
func receiver(t *testing.T) (string, <-chan []byte) {
	got := make(chan []byte, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		body, _ := io.ReadAll(r.Body)
		got <- body
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/services/T000/B000/XXXX", got
}

func TestConformance(t *testing.T) {
	for _, typ := range []sdk.TargetType{sdk.TargetSlack, sdk.TargetTeams} {
		t.Run(string(typ), func(t *testing.T) {
			plugintest.Run(t, plugintest.Suite{
				New: configured,
				Receiver: func(t *testing.T) (sdk.Target, <-chan []byte) {
					u, got := receiver(t)
					return sdk.Target{ID: "1", Type: typ, URL: u}, got
				},
				HTTPTarget: func(u string) sdk.Target { return sdk.Target{ID: "1", Type: typ, URL: u} },
				BadTarget:  &sdk.Target{ID: "1", Type: sdk.TargetEmail, URL: "https://hooks.example.com/x"},
			})
		})
	}
}

func post(t *testing.T, typ sdk.TargetType, msg *sdk.Notification) map[string]any {
	t.Helper()
	u, got := receiver(t)
	msg.Target = sdk.Target{Type: typ, URL: u}
	if err := configured(t).Notify(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(<-got, &body); err != nil {
		t.Fatal(err)
	}
	return body
}

// at walks decoded JSON: keys for objects, ints for arrays.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %T is not an object", path, v)
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: %v has no element %d", path, v, k)
			}
			v = a[k]
		}
	}
	return v
}

func TestSlackPayloadShape(t *testing.T) {
	msg := plugintest.Sample(sdk.OnScaledArtifact, sdk.Target{})
	msg.Payload.Event.Environment.Name = "prod <eu> & co"
	body := post(t, sdk.TargetSlack, msg)

	if text := at(t, body, "text").(string); text != "backend scaled from 3 to 5 instances in prod &lt;eu&gt; &amp; co" {
		t.Errorf("text %q", text)
	}
	if at(t, body, "blocks", 0, "type") != "header" || at(t, body, "blocks", 0, "text", "type") != "plain_text" {
		t.Errorf("first block is not a plain-text header: %v", at(t, body, "blocks", 0))
	}
	section := at(t, body, "blocks", 1)
	if at(t, section, "type") != "section" {
		t.Fatalf("second block %v is not a section", section)
	}
	fields := at(t, section, "fields").([]any)
	if len(fields) == 0 || len(fields) > 10 {
		t.Fatalf("a section has %d fields; Slack takes 1 to 10", len(fields))
	}
	if f := at(t, fields[0], "text").(string); at(t, fields[0], "type") != "mrkdwn" || f != "*Environment*\nprod &lt;eu&gt; &amp; co" {
		t.Errorf("first field %v", fields[0])
	}
	var sawButton, sawContext bool
	for _, b := range at(t, body, "blocks").([]any) {
		switch at(t, b, "type") {
		case "actions":
			sawButton = at(t, b, "elements", 0, "url") == msg.Payload.Event.Artifact.HTMLURL
		case "context":
			sawContext = strings.Contains(at(t, b, "elements", 0, "text").(string), msg.Payload.DeliveryID)
		}
	}
	if !sawButton || !sawContext {
		t.Errorf("button to the artifact %v, context with the delivery id %v: %v", sawButton, sawContext, body)
	}
}

func TestTeamsPayloadShape(t *testing.T) {
	msg := plugintest.Sample(sdk.OnNonCompliantEnv, sdk.Target{})
	body := post(t, sdk.TargetTeams, msg)

	if at(t, body, "type") != "message" {
		t.Errorf("type %v, want message", at(t, body, "type"))
	}
	if ct := at(t, body, "attachments", 0, "contentType"); ct != "application/vnd.microsoft.card.adaptive" {
		t.Errorf("contentType %v", ct)
	}
	card := at(t, body, "attachments", 0, "content")
	if at(t, card, "type") != "AdaptiveCard" || at(t, card, "version") != "1.4" {
		t.Errorf("content is not an Adaptive Card 1.4: %v", card)
	}
	if title := at(t, card, "body", 0, "text"); at(t, card, "body", 0, "type") != "TextBlock" || title != "production-eu is not compliant" {
		t.Errorf("title block %v", at(t, card, "body", 0))
	}
	if at(t, card, "body", 1, "type") != "FactSet" || at(t, card, "body", 1, "facts", 0, "title") != "Environment" ||
		at(t, card, "body", 1, "facts", 0, "value") != "production-eu" {
		t.Errorf("fact set %v", at(t, card, "body", 1))
	}
	if at(t, card, "actions", 0, "type") != "Action.OpenUrl" || at(t, card, "actions", 0, "url") != msg.Payload.Event.Snapshot.HTMLURL {
		t.Errorf("action %v, want a link to the snapshot", at(t, card, "actions"))
	}
}
