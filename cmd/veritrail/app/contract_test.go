package app

import (
	"encoding/json"
	"net/http"
	"testing"
)

// The Kosli CLI contract of CLIENT-2.md, sent as the CLI sends it, on both run modes.

// TestContractErrorBodies: only validation failures carry "errors" (an object keyed by field);
// every other error is {"message": ...} alone, since the CLI appends ": " and the value of a
// present "errors" key, and would print ": <nil>" for a null one.
func TestContractErrorBodies(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		setupFlow(t, k)
		for name, r := range map[string]reply{
			"unknown flow":    k.get("/flows/" + testOrg + "/nope"),
			"unknown trail":   k.get("/trails/" + testOrg + "/app/nope"),
			"unknown route":   k.get("/no-such-route/" + testOrg),
			"wrong method":    k.send(http.MethodDelete, "/flows/"+testOrg, nil),
			"empty snappish":  k.get("/env-diff/" + testOrg + "?snappish1=&snappish2=x"),
			"unknown control": k.get("/controls/" + testOrg + "/NOPE"),
		} {
			if r.Status < 400 || r.Status >= 500 {
				t.Errorf("%s: status %d: %s", name, r.Status, r.Body)
				continue
			}
			body := r.JSON(t)
			if _, ok := body["errors"]; ok {
				t.Errorf("%s: a non-validation error carries \"errors\": %s", name, r.Body)
			}
			if msg, _ := body["message"].(string); msg == "" {
				t.Errorf("%s: no message: %s", name, r.Body)
			}
		}
		wantMessage(t, k.get("/flows/"+testOrg+"/nope"), http.StatusNotFound, "Flow named 'nope' does not exist for organization '"+testOrg+"'")
		wantMessage(t, k.get("/env-diff/"+testOrg+"?snappish1=&snappish2=x"), http.StatusBadRequest, "Bad snappish ")

		// A validation failure: "errors" is an object of single strings keyed by field.
		r := k.send(http.MethodPost, "/controls/"+testOrg, map[string]any{"identifier": "bad id", "name": "x"})
		wantError(t, r, http.StatusBadRequest, "Input payload validation failed", "identifier")
		var body struct {
			Errors map[string]string `json:"errors"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("errors is not an object of strings: %s", r.Body)
		}
	})
}

// wantMessage checks an error whose body is exactly {"message": message}.
func wantMessage(t *testing.T, r reply, status int, message string) {
	t.Helper()
	r.want(t, status)
	body := r.JSON(t)
	if len(body) != 1 || body["message"] != message {
		t.Fatalf("body %s, want {\"message\": %q}", r.Body, message)
	}
}

// TestContractReady: /ready at the host root answers the plain text OK without a token; the
// CLI prints the raw body, so a JSON string would show its quotes.
func TestContractReady(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		r := newKosli(t, e.base, "").get("/ready").want(t, http.StatusOK)
		if string(r.Body) != "OK" {
			t.Fatalf("/ready body %q, want OK", r.Body)
		}
	})
}

// TestContractSnapshotCompliant: compliant is a boolean in snapshot lists and gets, false for
// an environment no policy decides (the CLI type-asserts a boolean; `assert snapshot` then
// prints NON-COMPLIANT).
func TestContractSnapshotCompliant(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "K8S", "description": ""}).want(t, http.StatusCreated)
		k.send(http.MethodPut, "/environments/"+testOrg+"/prod/report/K8S", map[string]any{"artifacts": []any{}}).want(t, http.StatusCreated)
		list := k.get("/snapshots/"+testOrg+"/prod?page=1&per_page=15&interval=&reverse=false").want(t, http.StatusOK).Array(t)
		if len(list) != 1 || list[0].(map[string]any)["compliant"] != false {
			t.Fatalf("snapshot list: %v", list)
		}
		for _, frag := range []string{"-1", "1", "%231"} {
			if s := k.get("/snapshots/"+testOrg+"/prod/"+frag).want(t, http.StatusOK).JSON(t); s["compliant"] != false {
				t.Fatalf("snapshot %s: compliant %v", frag, s["compliant"])
			}
		}
	})
}
