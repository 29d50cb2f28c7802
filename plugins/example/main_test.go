package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/veritrail/veritrail/plugins/sdk"
	"github.com/veritrail/veritrail/plugins/sdk/plugintest"
)

func configured(t *testing.T) sdk.Notifier {
	p := newPager()
	if err := p.Configure(context.Background(), map[string]string{"allow_private": "true", "token": "t0ken"}); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	plugintest.Run(t, plugintest.Suite{
		New: configured,
		Receiver: func(t *testing.T) (sdk.Target, <-chan []byte) {
			got := make(chan []byte, 16)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				got <- body
				w.WriteHeader(http.StatusCreated)
			}))
			t.Cleanup(srv.Close)
			return sdk.Target{ID: "1", Type: sdk.TargetPlugin, Plugin: "pager", URL: srv.URL + "/incidents"}, got
		},
		HTTPTarget: func(u string) sdk.Target { return sdk.Target{ID: "1", Type: sdk.TargetPlugin, Plugin: "pager", URL: u} },
		BadTarget:  &sdk.Target{ID: "1", Type: sdk.TargetPlugin, Plugin: "pager"},
	})
}

func TestIncident(t *testing.T) {
	type request struct {
		auth string
		in   incident
	}
	got := make(chan request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in incident
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			t.Error(err)
		}
		got <- request{r.Header.Get("Authorization"), in}
	}))
	defer srv.Close()
	msg := plugintest.Sample(sdk.OnNonCompliantEnv, sdk.Target{Type: sdk.TargetPlugin, URL: srv.URL,
		Params: map[string]string{"severity": "critical"}})
	if err := configured(t).Notify(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.auth != "Bearer t0ken" || r.in.DedupKey != msg.Payload.DeliveryID || r.in.Severity != "critical" ||
		r.in.Summary != "production-eu is not compliant" || r.in.Source != "production-eu" ||
		r.in.Link != msg.Payload.Event.Snapshot.HTMLURL || r.in.Details["Snapshot"] != "#42" {
		t.Fatalf("incident %+v with authorization %q", r.in, r.auth)
	}
}
