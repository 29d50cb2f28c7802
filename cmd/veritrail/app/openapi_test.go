package app

import (
	"net/http"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/internal/openapicheck"
)

// described checks every answer the end-to-end suite receives against the OpenAPI description
// of the server that gave it (fetched once per server).
var described = &openapicheck.Checker{}

const apiPrefix = openapicheck.Prefix

// checkAnswer fails the test when the server's description does not list the answer: its
// status for the operation, its body against the schema of that status and content type.
func checkAnswer(t testing.TB, method, rawURL string, status int, header http.Header, body []byte) {
	t.Helper()
	if msg := described.Answer(method, rawURL, status, header, body); msg != "" {
		t.Errorf("OpenAPI: %s", msg)
	}
}

// TestOpenAPICheck: the served description is strict enough for the suite's silence to mean
// something: its Error schema refuses `"errors": null` and a list, and it lists no status the
// API never answers (internal/openapicheck tests the check itself).
func TestOpenAPICheck(t *testing.T) {
	base, _ := startEmbedded(t)
	d, err := described.Described(base)
	if err != nil {
		t.Fatal(err)
	}
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	flows := apiPrefix + "/flows/" + testOrg
	for _, c := range []struct {
		name, method, path string
		status             int
		body               string
		want               string // a part of the complaint; "" for none
	}{
		{"a listed error", "GET", flows, 404, `{"message":"no"}`, ""},
		{"errors null", "GET", flows, 400, `{"message":"no","errors":null}`, "listFlows"},
		{"errors a list", "GET", flows, 400, `{"message":"no","errors":[]}`, "breaks its schema"},
		{"a validation failure", "GET", flows, 400, `{"message":"Input payload validation failed","errors":{"query.page":"x"}}`, ""},
		{"422, never answered", "PUT", flows, 422, `{"message":"no"}`, "not listed"},
		{"unrouted method, bad body", "PATCH", flows, 405, `{"message":"no","errors":null}`, "breaks its schema"},
		{"literal beats parameter", "GET", apiPrefix + "/user/default-org", 200, `{"default_org_name":"acme"}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := d.Check(c.method, c.path, c.status, jsonHeader, []byte(c.body))
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("check = %q, want %q", got, c.want)
			}
		})
	}
}
