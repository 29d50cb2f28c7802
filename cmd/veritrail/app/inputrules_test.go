package app

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"strings"
	"testing"
)

// parts sends a multipart body of raw parts in order: each is a name, optionally a filename, and bytes.
func (k *kosli) parts(method, path string, ps ...formPart) reply {
	k.t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, p := range ps {
		h := textproto.MIMEHeader{}
		disp := `form-data; name="` + p.name + `"`
		if p.filename != "" {
			// RFC 2231's form, so that any bytes can be sent (a header line cannot hold a NUL).
			disp += `; filename*=UTF-8''` + url.PathEscape(p.filename)
			h.Set("Content-Type", "application/octet-stream")
		}
		h.Set("Content-Disposition", disp)
		pw, err := w.CreatePart(h)
		if err != nil {
			k.t.Fatal(err)
		}
		pw.Write(p.data)
	}
	w.Close()
	return k.do(method, path, w.FormDataContentType(), buf.Bytes())
}

type formPart struct {
	name, filename string
	data           []byte
}

// TestInputRules: what the store would refuse, or a name the contract does not allow, is a 400 naming the field
// (never a 201 followed by a rejection in the evaluator, nor a 5xx); valid names of the Kosli CLI's kinds keep working.
func TestInputRules(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		org := testOrg
		setupFlow(t, k)
		att := "/attestations/" + org + "/app/trail/t1/"
		generic := func(data any) func() reply {
			return func() reply { return k.multipart(http.MethodPost, att+"generic", "data_json", data) }
		}
		long := strings.Repeat("a", 10000)
		name257 := strings.Repeat("n", 257)
		refused := []struct {
			name  string
			do    func() reply
			field string
		}{
			{"NUL in attestation_name", generic(map[string]any{"attestation_name": "nul\x00name"}), "attestation_name"},
			{"NUL in a data_json value", generic(map[string]any{"attestation_name": "x", "user_data": map[string]any{"note": "a\x00b"}}), "user_data.note"},
			{"NUL in a data_json list item", generic(map[string]any{"attestation_name": "x", "user_data": map[string]any{"l": []string{"ok", "a\x00"}}}), "user_data.l[1]"},
			{"NUL in a data_json key", generic(map[string]any{"attestation_name": "x", "user_data": map[string]any{"k\x00": 1}}), "user_data"},
			{"NUL in a top-level data_json key", generic(map[string]any{"attestation_name": "x", "k\x00": 1}), "data_json"},
			{"NUL in a non-generic kind", func() reply {
				return k.multipart(http.MethodPost, att+"junit", "data_json", map[string]any{"attestation_name": "x",
					"junit_results": []any{map[string]any{"name": "s\x00", "failures": 0, "errors": 0}}})
			}, "junit_results[0].name"},
			{"RTL override in attestation_name", generic(map[string]any{"attestation_name": "invoice\u202Efdp.exe"}), "attestation_name"},
			{"bidi isolate in attestation_name", generic(map[string]any{"attestation_name": "a\u2066b"}), "attestation_name"},
			{"control character in attestation_name", generic(map[string]any{"attestation_name": "bell\x07"}), "attestation_name"},
			{"C1 control in attestation_name", generic(map[string]any{"attestation_name": "c1\u0085"}), "attestation_name"},
			{"DEL in attestation_name", generic(map[string]any{"attestation_name": "del\x7f"}), "attestation_name"},
			{"10,000-character attestation_name", generic(map[string]any{"attestation_name": long}), "attestation_name"},
			{"257-character attestation_name", generic(map[string]any{"attestation_name": name257}), "attestation_name"},
			{"invalid UTF-8 in data_json", func() reply {
				return k.multipart(http.MethodPost, att+"generic", "data_json", rawJSON("{\"attestation_name\": \"x\", \"user_data\": {\"s\": \"\xff\xfe\"}}"))
			}, "user_data.s"},
			{"invalid UTF-8 in attestation_name", func() reply {
				return k.multipart(http.MethodPost, att+"generic", "data_json", rawJSON("{\"attestation_name\": \"x\xc3\"}"))
			}, "attestation_name"},
			{"invalid UTF-8 in a key with escapes", func() reply {
				// An escaped key takes the decoder's path, not the one-pass split.
				return k.multipart(http.MethodPost, att+"generic", "data_json", rawJSON("{\"attestation\\u005fname\": \"x\", \"d\": \"\xff\"}"))
			}, "d"},
			{"two data_json parts", func() reply {
				return k.parts(http.MethodPost, att+"generic", formPart{name: "data_json", data: []byte(`{"attestation_name": "first"}`)},
					formPart{name: "data_json", data: []byte(`{"attestation_name": "second"}`)})
			}, "data_json"},
			{"data_json once as a field and once as a file", func() reply {
				return k.parts(http.MethodPost, att+"generic", formPart{name: "data_json", data: []byte(`{"attestation_name": "first"}`)},
					formPart{name: "data_json", filename: "d.json", data: []byte(`{"attestation_name": "second"}`)})
			}, "data_json"},
			{"two attachments", func() reply {
				return k.parts(http.MethodPost, att+"generic", formPart{name: "data_json", data: []byte(`{"attestation_name": "x"}`)},
					formPart{name: "attachment_file", filename: "a", data: []byte("a")}, formPart{name: "attachment_file", filename: "b", data: []byte("b")})
			}, "attachment_file"},
			{"attachment file name with a NUL", func() reply {
				return k.parts(http.MethodPost, att+"generic", formPart{name: "data_json", data: []byte(`{"attestation_name": "x"}`)},
					formPart{name: "attachment_file", filename: "a\x00.txt", data: []byte("a")})
			}, "attachment_file"},
			{"attachment file name with an RTL override", func() reply {
				return k.parts(http.MethodPost, att+"generic", formPart{name: "data_json", data: []byte(`{"attestation_name": "x"}`)},
					formPart{name: "attachment_file", filename: "report\u202Efdp.exe", data: []byte("a")})
			}, "attachment_file"},
			{"NUL in override attestation_name", func() reply {
				return k.send(http.MethodPost, att+"override", map[string]any{"attestation_name": "tests\x00", "reason": "r", "new_compliance_status": "COMPLIANT"})
			}, "attestation_name"},
			{"RTL override in override attestation_name", func() reply {
				return k.send(http.MethodPost, att+"override", map[string]any{"attestation_name": "tests\u202E", "reason": "r", "new_compliance_status": "COMPLIANT"})
			}, "attestation_name"},
			{"NUL in a JSON body's user_data", func() reply {
				return k.send(http.MethodPost, att+"override", map[string]any{"attestation_name": "tests", "reason": "r",
					"new_compliance_status": "COMPLIANT", "user_data": map[string]any{"a": []any{map[string]any{"b": "\x00"}}}})
			}, "user_data.a[0].b"},
			{"invalid UTF-8 in a JSON body", func() reply {
				return k.do(http.MethodPost, "/artifacts/"+org+"/app", "application/json; charset=utf-8",
					[]byte("{\"fingerprint\": \""+fpBackend+"\", \"filename\": \"f\xff\", \"build_url\": \"b\", \"commit_url\": \"c\"}"))
			}, "filename"},
			{"257-character trail name", func() reply {
				return k.multipart(http.MethodPut, "/trails/"+org+"/app", "data_json", map[string]any{"name": name257})
			}, "name"},
			{"NUL in a trail's description", func() reply {
				return k.multipart(http.MethodPut, "/trails/"+org+"/app", "data_json", map[string]any{"name": "t2", "description": "\x00"})
			}, "description"},
			{"invalid UTF-8 in a trail's data_json", func() reply {
				return k.multipart(http.MethodPut, "/trails/"+org+"/app", "data_json", rawJSON("{\"name\": \"t2\", \"description\": \"\xc0\xaf\"}"))
			}, "description"},
			{"257-character trail name of an artifact", func() reply {
				return k.send(http.MethodPost, "/artifacts/"+org+"/app", map[string]any{"fingerprint": fpBackend, "filename": "f",
					"build_url": "b", "commit_url": "c", "trail_name": name257})
			}, "trail_name"},
			{"257-character flow name", func() reply {
				return k.multipart(http.MethodPut, "/flows/"+org+"/template_file", "data_json", map[string]any{"name": name257},
					file{"template_file", "t.yml", []byte(simpleTemplate)})
			}, "name"},
			{"257-character flow name (legacy JSON)", func() reply {
				return k.send(http.MethodPut, "/flows/"+org, map[string]any{"name": name257, "description": ""})
			}, "name"},
			{"257-character new flow name", func() reply {
				return k.send(http.MethodPut, "/flows/"+org+"/app/rename", map[string]any{"new_name": name257})
			}, "new_name"},
			{"template file with a NUL", func() reply {
				return k.multipart(http.MethodPut, "/flows/"+org+"/template_file", "data_json", map[string]any{"name": "f3"},
					file{"template_file", "t.yml", []byte("version: 1\x00\n")})
			}, "template_file"},
			{"257-character environment name", func() reply {
				return k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": name257, "type": "K8S"})
			}, "name"},
			{"environment name with ~ (snapshot expressions use it)", func() reply {
				return k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": "prod~1", "type": "K8S"})
			}, "name"},
			{"257-character policy name", func() reply {
				return k.parts(http.MethodPut, "/policies/"+org, formPart{name: "payload", data: []byte(`{"name": "` + name257 + `"}`)},
					formPart{name: "policy_file", filename: "p.yml", data: []byte("_schema: https://kosli.com/schemas/policy/environment/v1\n")})
			}, "name"},
			{"two policy payloads", func() reply {
				return k.parts(http.MethodPut, "/policies/"+org, formPart{name: "payload", data: []byte(`{"name": "p1"}`)},
					formPart{name: "payload", data: []byte(`{"name": "p2"}`)},
					formPart{name: "policy_file", filename: "p.yml", data: []byte("_schema: https://kosli.com/schemas/policy/environment/v1\n")})
			}, "payload"},
			{"257-character control identifier", func() reply {
				return k.send(http.MethodPost, "/controls/"+org, map[string]any{"identifier": name257, "name": "n"})
			}, "identifier"},
			{"control name with a control character", func() reply {
				return k.send(http.MethodPost, "/controls/"+org, map[string]any{"identifier": "C-1", "name": "line\nbreak"})
			}, "name"},
			{"257-character custom type name", func() reply {
				return k.multipart(http.MethodPost, "/custom-attestation-types/"+org, "data_json", map[string]any{"name": name257},
					file{"type_schema", "s.json", []byte(`{"type": "object"}`)})
			}, "name"},
			{"NUL in a path name", func() reply { return k.get("/flows/" + org + "/a%00b") }, "flow"},
			{"invalid UTF-8 in a path name", func() reply { return k.get("/trails/" + org + "/app/%FF") }, "trail"},
			{"NUL in a query parameter", func() reply { return k.get("/trails/" + org + "?flow=a%00") }, "query.flow"},
			{"RTL override in a notification rule's name", func() reply {
				return k.send(http.MethodPost, notificationsPath, map[string]any{"name": "x\u202E", "environments": []string{"nowhere"},
					"triggers": []string{"ON_STARTED_ARTIFACT"}, "targets": []map[string]any{{"type": "EMAIL", "emails": []string{"a@example.com"}}}})
			}, "name"},
		}
		for _, c := range refused {
			t.Run(c.name, func(t *testing.T) {
				wantError(t, c.do(), http.StatusBadRequest, "Input payload validation failed", c.field)
			})
		}

		// Names of the kinds the Kosli CLI sends keep working: commits, dots, tildes, the contract's limits exactly.
		name256 := strings.Repeat("n", 256)
		k.multipart(http.MethodPut, "/trails/"+org+"/app", "data_json", map[string]any{"name": commit,
			"description": "multi\nline\ttext, unicode: é ✓"}).want(t, http.StatusCreated)
		k.multipart(http.MethodPut, "/trails/"+org+"/app", "data_json", map[string]any{"name": "v1.2.3~rc_1-x"}).want(t, http.StatusCreated)
		k.multipart(http.MethodPut, "/trails/"+org+"/app", "data_json", map[string]any{"name": name256}).want(t, http.StatusCreated)
		k.multipart(http.MethodPut, "/flows/"+org+"/template_file", "data_json", map[string]any{"name": "my.flow~1", "description": ""},
			file{"template_file", "t.yml", []byte(simpleTemplate)}).want(t, http.StatusCreated)
		k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": "prod.eu-1_b", "type": "K8S"}).want(t, http.StatusCreated)
		k.send(http.MethodPost, "/controls/"+org, map[string]any{"identifier": "~SOC2.cc-1_a", "name": "Four eyes (é)"}).want(t, http.StatusCreated)
		for _, n := range []string{"unit-tests", "snyk container scan", "tests (é)", name256} {
			k.multipart(http.MethodPost, att+"generic", "data_json", map[string]any{"attestation_name": n,
				"user_data": map[string]any{"text": "tab\there, escaped \\u0000 is text", "emoji": "🚀"}}).want(t, http.StatusCreated)
		}
		got := k.get("/attestations/"+org+"/app/trail/t1/unit-tests").want(t, http.StatusOK).Array(t)
		if ud := got[0].(map[string]any)["user_data"].(map[string]any); ud["text"] != "tab\there, escaped \\u0000 is text" || ud["emoji"] != "🚀" {
			t.Fatalf("user_data came back as %v", ud)
		}

		// Nothing of the refused requests was written: the trail holds the template's one expected
		// attestation and the four accepted ones.
		tr := k.get("/trails/"+org+"/app/t1").want(t, http.StatusOK).JSON(t)
		if n := len(tr["compliance_status"].(map[string]any)["attestations_statuses"].([]any)); n != 5 {
			t.Fatalf("refused requests left attestations behind: %s", tr["compliance_status"])
		}
	})
}

// fakeResolver resolves names from a table, without DNS; other names do not resolve.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addrs, ok := f[host]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestNotificationTargetAddresses: a webhook or chat target at an address the notify tier would refuse
// to deliver to is refused when the rule is created or updated, unless --notify-allow-private is on,
// which reaches ingest from the notify section of the configuration.
func TestNotificationTargetAddresses(t *testing.T) {
	private := []string{"http://10.0.0.1/hook", "http://127.0.0.1:9/hook", "http://169.254.169.254/latest/meta-data/",
		"http://[::1]:8080/hook", "https://internal.example/hook"}
	resolver := fakeResolver{"internal.example": {netip.MustParseAddr("10.0.0.1")},
		"hooks.example.com": {netip.MustParseAddr("93.184.216.34")}}
	rule := func(typ, url string) map[string]any {
		return map[string]any{"name": "watch", "environments": []string{"prod"}, "triggers": []string{"ON_STARTED_ARTIFACT"},
			"targets": []map[string]any{{"type": "EMAIL", "emails": []string{"ops@example.com"}}, {"type": typ, "webhook": url}}}
	}
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow-private=%v", allow), func(t *testing.T) {
			forEachModeWith(t, func(c *Config) {
				c.Notify.Notifiers.AllowPrivate = allow
				c.Resolver = resolver
			}, func(t *testing.T, e env) {
				k := e.k
				k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "K8S"}).want(t, http.StatusCreated)
				created := createRule(t, k, rule("WEBHOOK", "https://hooks.example.com/veritrail"))
				number := created["number"]
				for _, typ := range []string{"WEBHOOK", "SLACK", "MS_TEAMS"} {
					for _, u := range private {
						create := k.send(http.MethodPost, notificationsPath, rule(typ, u))
						update := k.send(http.MethodPut, fmt.Sprintf("%s/%v", notificationsPath, number), rule(typ, u))
						if allow {
							create.want(t, http.StatusCreated)
							update.want(t, http.StatusOK)
							continue
						}
						wantError(t, create, http.StatusBadRequest, "Input payload validation failed", "targets[1].webhook")
						wantError(t, update, http.StatusBadRequest, "Input payload validation failed", "targets[1].webhook")
					}
				}
				// A plugin guards its own connections: its URL is not checked here.
				createRule(t, k, map[string]any{"name": "pager", "environments": []string{"prod"}, "triggers": []string{"ON_STARTED_ARTIFACT"},
					"targets": []map[string]any{{"type": "PLUGIN", "plugin": "pager", "webhook": "http://10.0.0.1/incidents"}}})
				if !allow {
					got := getRule(t, k, number)
					if u := got["targets"].([]any)[1].(map[string]any)["webhook"]; u != "https://hooks.example.com/veritrail" {
						t.Fatalf("a refused update changed the rule: target %v", u)
					}
				}
			})
		})
	}
}
