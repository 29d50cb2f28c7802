package openapicheck

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const doc = `{
 "openapi": "3.1.0",
 "components": {"schemas": {
  "Error": {"type": "object", "additionalProperties": false, "required": ["message"],
   "properties": {"message": {"type": "string"}, "errors": {"type": "object", "additionalProperties": {"type": "string"}}}},
  "Thing": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}},
 "paths": {
  "/api/v2/things/{org}/{name}": {"get": {"operationId": "getThing",
   "parameters": [{"name": "org", "in": "path"}, {"name": "name", "in": "path", "x-veritrail-multi-segment": true}],
   "responses": {
    "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}},
    "404": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}}}},
  "/api/v2/items/{org}/{id}": {"get": {"operationId": "getItem",
   "responses": {"200": {"content": {"application/octet-stream": {"schema": {"type": "string"}}}}}},
   "delete": {"operationId": "deleteItem", "responses": {"204": {"description": "gone"}}}},
  "/api/v2/items/{org}/latest": {"get": {"operationId": "latestItem",
   "responses": {"200": {"content": {"application/json": {"schema": {"type": "array"}}}}}}}
 }}`

func TestCheck(t *testing.T) {
	d, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	js := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	for _, c := range []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		want               string // a part of the complaint; "" for none
	}{
		{"matches", "GET", "/api/v2/things/o/a", 200, js, `{"name":"a"}`, ""},
		{"breaks the schema", "GET", "/api/v2/things/o/a", 200, js, `{"name":1}`, "getThing (GET /api/v2/things/{org}/{name}), status 200: the body breaks"},
		{"a name over several segments", "GET", "/api/v2/things/o/a/b/c/d", 200, js, `{"name":"a/b/c/d"}`, ""},
		{"errors null", "GET", "/api/v2/things/o/a", 404, js, `{"message":"no","errors":null}`, "breaks its schema"},
		{"status not listed", "GET", "/api/v2/things/o/a", 409, js, `{"message":"no"}`, "not listed (listed: 200, 404)"},
		{"not JSON", "GET", "/api/v2/things/o/a", 404, js, `no`, "not JSON"},
		{"content type not declared", "GET", "/api/v2/things/o/a", 404, http.Header{"Content-Type": {"text/plain"}}, `no`, "not declared"},
		{"bytes", "GET", "/api/v2/items/o/1", 200, http.Header{"Content-Type": {"application/octet-stream"}}, "\x00\x01", ""},
		{"literal beats parameter", "GET", "/api/v2/items/o/latest", 200, js, `[]`, ""},
		{"literal beats parameter, wrong body", "GET", "/api/v2/items/o/latest", 200, js, `{}`, "latestItem"},
		{"no body declared", "DELETE", "/api/v2/items/o/1", 204, http.Header{}, ``, ""},
		{"a body where none is declared", "DELETE", "/api/v2/items/o/1", 204, js, `{}`, "declares no body"},
		{"unrouted path", "GET", "/api/v2/nothing", 404, js, `{"message":"no"}`, ""},
		{"unrouted path, 200", "GET", "/api/v2/nothing", 200, js, `{}`, "want the global 404"},
		{"unrouted method", "PUT", "/api/v2/items/o/1", 405, js, `{"message":"no"}`, ""},
		{"unrouted method, 404", "PUT", "/api/v2/items/o/1", 404, js, `{"message":"no"}`, "want the global 405"},
		{"unrouted method, bad body", "PUT", "/api/v2/items/o/1", 405, js, `{"message":"no","errors":[]}`, "breaks its schema"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := d.Check(c.method, c.path, c.status, c.header, []byte(c.body))
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("Check = %q, want %q", got, c.want)
			}
		})
	}
}

// TestTransport: the transport fetches the server's description once, reports what it does not
// list, leaves other paths alone and hands the body on unchanged.
func TestTransport(t *testing.T) {
	fetched := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v2/openapi.json":
			fetched++
			io.WriteString(w, doc)
		case "/api/v2/things/o/good":
			io.WriteString(w, `{"name":"good"}`)
		case "/api/v2/things/o/bad":
			io.WriteString(w, `{"nom":"bad"}`)
		default:
			io.WriteString(w, `"not described"`)
		}
	}))
	defer srv.Close()
	var complaints []string
	client := &http.Client{Transport: &Transport{Checker: &Checker{}, Report: func(s string) { complaints = append(complaints, s) }}}
	for _, path := range []string{"/api/v2/things/o/good", "/api/v2/things/o/bad", "/ready", "/api/v2/things/o/good"} {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if path == "/api/v2/things/o/good" && string(b) != `{"name":"good"}` {
			t.Fatalf("body handed on: %q", b)
		}
	}
	if fetched != 1 || len(complaints) != 1 || !strings.Contains(complaints[0], "missing property 'name'") {
		t.Fatalf("fetched %d times; complaints %q", fetched, complaints)
	}
}
