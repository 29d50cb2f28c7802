package app

import (
	"net/http"
	"strings"
	"testing"
)

// TestControls creates, versions, lists, tags, archives and unarchives controls, and checks that
// decisions name an existing, active control.
func TestControls(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k, org := e.k, testOrg
		base := "/controls/" + org
		k.send(http.MethodPost, base, map[string]any{"identifier": "SEC-1", "name": "Security review", "description": "two eyes"}).
			want(t, http.StatusCreated)
		wantError(t, k.send(http.MethodPost, base, map[string]any{"identifier": "SEC-1", "name": "again"}), http.StatusConflict,
			"A control with identifier 'SEC-1' already exists in organization '"+org+"'", "")
		wantError(t, k.send(http.MethodPost, base, map[string]any{"identifier": "bad id", "name": "x"}), http.StatusBadRequest,
			"Input payload validation failed", "identifier")
		wantError(t, k.send(http.MethodPost, base, map[string]any{"identifier": "NO-NAME"}), http.StatusBadRequest,
			"Input payload validation failed", "name")
		k.send(http.MethodPost, base, map[string]any{"identifier": "OPS-1", "name": "Change ticket"}).want(t, http.StatusCreated)

		k.send(http.MethodPut, base+"/SEC-1", map[string]any{"description": "four eyes"}).want(t, http.StatusOK)
		c := k.get(base+"/SEC-1").want(t, http.StatusOK).JSON(t)
		versions, _ := c["versions"].([]any)
		if c["name"] != "Security review" || c["description"] != "four eyes" || c["version"] != float64(2) || len(versions) != 2 ||
			c["created_by"] != "admin" || c["archived"] != false {
			t.Fatalf("control after update: %v", c)
		}
		wantError(t, k.send(http.MethodPut, base+"/NOPE", map[string]any{"name": "x"}), http.StatusNotFound,
			"Control 'NOPE' does not exist in organization '"+org+"'", "")

		k.send(http.MethodPatch, "/tags/"+org+"/control/OPS-1", map[string]any{"set_tags": map[string]string{"team": "ops"}}).
			want(t, http.StatusOK)
		list := k.get(base+"?per_page=1&page=2").want(t, http.StatusOK).JSON(t)
		controls, _ := list["controls"].([]any)
		if list["total_count"] != float64(2) || list["total_pages"] != float64(2) || len(controls) != 1 {
			t.Fatalf("list page 2: %v", list)
		}
		if second := controls[0].(map[string]any); second["identifier"] != "SEC-1" {
			t.Fatalf("list page 2 holds %v, want SEC-1 (identifiers in order)", second)
		}
		if ops := k.get(base+"/OPS-1").want(t, http.StatusOK).JSON(t); ops["tags"].(map[string]any)["team"] != "ops" {
			t.Fatalf("tags: %v", ops)
		}

		// Decisions need an existing, active control.
		setupFlow(t, k)
		att := "/attestations/" + org + "/app/trail/t1/system"
		decision := func(control string) reply {
			return k.multipart(http.MethodPost, att, "data_json", map[string]any{"attestation_name": "review", "type_name": "decision",
				"control": control, "attestation_data": map[string]any{"is_compliant": true}, "user_data": map[string]any{}})
		}
		wantError(t, decision("NOPE"), http.StatusNotFound, "Control 'NOPE' does not exist in organization '"+org+"'", "")
		decision("OPS-1").want(t, http.StatusCreated)
		k.send(http.MethodPost, base+"/OPS-1/archive", nil).want(t, http.StatusOK)
		r := decision("OPS-1")
		wantError(t, r, http.StatusBadRequest, "Input payload validation failed", "control")
		if !strings.Contains(string(r.Body), "Control 'OPS-1' is archived in organization '"+org+"'") {
			t.Fatalf("archived control: %s", r.Body)
		}
		archived := k.get(base+"?archived=true").want(t, http.StatusOK).JSON(t)
		if archived["total_count"] != float64(1) {
			t.Fatalf("archived list: %v", archived)
		}
		wantError(t, k.send(http.MethodPost, base, map[string]any{"identifier": "OPS-1", "name": "reuse"}), http.StatusConflict,
			"A control with identifier 'OPS-1' already exists in organization '"+org+"'", "")
		k.send(http.MethodPost, base+"/OPS-1/unarchive", nil).want(t, http.StatusOK)
		decision("OPS-1").want(t, http.StatusCreated)
	})
}
