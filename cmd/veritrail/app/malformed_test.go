package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMalformedRequests sends every operation of the description requests the CLI would never
// send (a wrong content type, a method the path lacks, JSON that does not parse, a body over the
// limit, a multipart body without a boundary, unknown and ill-typed query values) and holds each
// answer to the description (kosli.do checks it is listed and matches its schema). Beyond that:
// never a 5xx, and `errors` only beside "Input payload validation failed".
func TestMalformedRequests(t *testing.T) {
	const limit = 64 << 10
	forEachModeWith(t, func(c *Config) {
		c.Ingest.MaxPartBytes = limit
		c.Ingest.MaxFileBytes = limit
	}, func(t *testing.T, e env) {
		k := e.k
		k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": "app", "description": ""},
			file{"template_file", "t.yml", []byte(simpleTemplate)}).want(t, http.StatusCreated)
		k.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "t1"}).want(t, http.StatusCreated)

		d, err := described.Described(e.base)
		if err != nil {
			t.Fatal(err)
		}
		// Path parameters get values that exist where they can (the organization, the flow, the
		// trail) so that the request gets past the lookups to what it is about.
		known := map[string]string{"org": testOrg, "flow": "app", "trail": "t1"}
		param := regexp.MustCompile(`\{([^}]+)\}`)
		huge := []byte(`{"name":"` + strings.Repeat("x", 2*limit) + `"}`)
		allMethods := []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete}
		ops := d.Operations()
		methods := map[string][]string{} // by path template
		for _, o := range ops {
			methods[o.Template] = append(methods[o.Template], o.Method)
		}

		answers := 0
		check := func(what string, r reply) {
			t.Helper()
			answers++
			if r.Status >= 500 {
				t.Errorf("%s: %d: %.300s", what, r.Status, r.Body)
				return
			}
			if r.Status < 400 {
				return
			}
			var body map[string]json.RawMessage
			if json.Unmarshal(r.Body, &body) != nil {
				return // kosli.do has complained already
			}
			// Validation failures carry errors: the usual message, or pydantic's text for a template.
			var msg string
			_ = json.Unmarshal(body["message"], &msg)
			if _, ok := body["errors"]; ok && msg != "Input payload validation failed" && !strings.Contains(msg, "validation errors for") {
				t.Errorf("%s: %d carries errors but is no validation failure: %.300s", what, r.Status, r.Body)
			}
		}
		for i, o := range ops {
			path := strings.TrimPrefix(param.ReplaceAllStringFunc(o.Template, func(s string) string {
				if v, ok := known[s[1:len(s)-1]]; ok {
					return v
				}
				return "x"
			}), apiPrefix)
			if i == 0 || ops[i-1].Template != o.Template {
				for _, m := range allMethods {
					if !slices.Contains(methods[o.Template], m) {
						check(fmt.Sprintf("%s %s (no such method)", m, path), k.do(m, path, "application/json", []byte("null")))
						break // one is enough per path
					}
				}
			}
			method := o.Method
			what := func(how string) string { return fmt.Sprintf("%s %s (%s), %s", method, path, o.ID, how) }
			if !o.HasBody {
				q := url.Values{"bogus": {"1"}}
				for _, p := range o.QueryParams {
					q[p] = []string{"not a value!"}
				}
				check(what("unknown query values"), k.do(method, path+"?"+q.Encode(), "application/json; charset=utf-8", nil))
				q = url.Values{}
				for _, p := range o.QueryParams {
					q.Add(p, "-1")
					q.Add(p, "")
				}
				check(what("negative and empty query values"), k.do(method, path+"?"+q.Encode(), "application/json", nil))
				continue
			}
			check(what("text/plain body"), k.do(method, path, "text/plain", []byte("hello")))
			check(what("unknown content type"), k.do(method, path, "application/x-bogus", []byte("{}")))
			check(what("JSON that does not parse"), k.do(method, path, "application/json", []byte(`{"name":`)))
			check(what("a JSON list"), k.do(method, path, "application/json", []byte(`[1,2]`)))
			check(what("the body null"), k.do(method, path, "application/json", []byte(`null`)))
			check(what("a body over the limit"), k.do(method, path, "application/json", huge))
			check(what("multipart without a boundary"), k.do(method, path, "multipart/form-data", []byte("--x\r\n")))
			check(what("a multipart body that ends early"), k.do(method, path, "multipart/form-data; boundary=x",
				[]byte("--x\r\nContent-Disposition: form-data; name=\"data_json\"\r\n\r\n{")))
			var big bytes.Buffer
			big.WriteString("--x\r\nContent-Disposition: form-data; name=\"data_json\"\r\n\r\n")
			big.Write(huge)
			big.WriteString("\r\n--x--\r\n")
			check(what("a multipart part over the limit"), k.do(method, path, "multipart/form-data; boundary=x", big.Bytes()))
		}
		if answers < 200 {
			t.Fatalf("only %d answers: the description lists too few operations for this test to mean much", answers)
		}
	})
}

// TestQueryErrorLocations: a query parameter Huma refuses (not a number, not a boolean, out of
// range) is named `query.<name>` in the hosted service's words, with the value sent
// (CLIENT-2.md, sections 2 and 5); the CLI prints `map[query.per_page:...]`.
func TestQueryErrorLocations(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		org := testOrg
		for _, c := range []struct{ path, key, text string }{
			{"/controls/" + org + "?page=1&per_page=abc", "query.per_page",
				"Input should be a valid integer, unable to parse string as an integer [input: abc]"},
			{"/controls/" + org + "?page=1&per_page=15&archived=maybe", "query.archived",
				"Input should be a valid boolean, unable to interpret input [input: maybe]"},
			{"/controls/" + org + "?page=1&per_page=500", "query.per_page", "Input should be less than or equal to 100 [input: 500]"},
			{"/environments/" + org + "?page=-2", "query.page", "Input should be greater than or equal to 0 [input: -2]"},
			{"/snapshots/" + org + "/prod?page=1&per_page=15&interval=&reverse=sideways", "query.reverse",
				"Input should be a valid boolean, unable to interpret input [input: sideways]"},
			{"/controls/" + org + "?page=1&per_page=", "query.per_page",
				"Input should be a valid integer, unable to parse string as an integer [input: ]"},
			{"/controls/" + org + "?page=1&per_page=15&archived", "query.archived",
				"Input should be a valid boolean, unable to interpret input [input: ]"},
			{"/environments/" + org + "?type=K8S&type=k8s", "query.type[1]",
				"Input should be 'K8S', 'ECS', 'S3', 'lambda', 'server', 'docker', 'azure-apps', 'cloud-run' or 'logical' [input: k8s]"},
		} {
			r := e.k.get(c.path)
			wantError(t, r, http.StatusBadRequest, "Input payload validation failed", c.key)
			if got := r.JSON(t)["errors"].(map[string]any)[c.key]; got != c.text {
				t.Errorf("GET %s: %s = %q, want %q", c.path, c.key, got, c.text)
			}
		}
	})
}
