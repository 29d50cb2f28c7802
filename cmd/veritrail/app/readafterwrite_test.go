package app

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/veritrail/veritrail/evaluate/store"
)

// readAfterWriteTemplate asks for a generic attestation "tests" on the artifact "app".
const readAfterWriteTemplate = "version: 1\ntrail:\n  artifacts:\n  - name: app\n    attestations:\n    - name: tests\n      type: generic\n"

// TestReadAfterWriteForEveryClient: a read that starts after a 201 reflects that write whoever
// reads: another key of the organization (a deploy job after a build job), or an anonymous
// reader of a public organization. No waiting in the test: each read comes right after the 201.
func TestReadAfterWriteForEveryClient(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		writer := e.k
		reader := keyFor(t, e, testOrg, "deploy", store.RoleMember)
		if err := e.store.SetOrgPublic(context.Background(), mustOrg(t, e.store, testOrg).ID, true); err != nil {
			t.Fatal(err)
		}
		anon := newKosli(t, e.base+"/api/v2", "")

		// A flow created with one key is there for the others at once.
		for i := range 5 {
			name := fmt.Sprintf("flow-%d", i)
			writer.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": name, "description": ""},
				file{"template_file", "t.yml", []byte(readAfterWriteTemplate)}).want(t, http.StatusCreated)
			reader.get("/flows/"+testOrg+"/"+name).want(t, http.StatusOK)
			writer.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": name + "-public", "description": ""},
				file{"template_file", "t.yml", []byte(readAfterWriteTemplate)}).want(t, http.StatusCreated)
			anon.get("/flows/"+testOrg+"/"+name+"-public").want(t, http.StatusOK)
		}
		// ...and a trail begun by another key right after finds the flow.
		reader.multipart(http.MethodPut, "/trails/"+testOrg+"/flow-0", "data_json", map[string]any{"name": "t1"}).want(t, http.StatusCreated)
		writer.send(http.MethodPost, "/artifacts/"+testOrg+"/flow-0", map[string]any{"fingerprint": fpBackend, "filename": "app",
			"build_url": "b", "commit_url": "c", "trail_name": "t1"}).want(t, http.StatusCreated)

		// Each attestation flips the artifact's compliance: the deploy job's assert, right after
		// the build job's 201, sees it, as do the attestation list and an anonymous reader.
		assert := "/asserts/" + testOrg + "/fingerprint/" + fpBackend
		for i := range 20 {
			compliant := i%2 == 0
			writer.multipart(http.MethodPost, "/attestations/"+testOrg+"/flow-0/trail/t1/generic", "data_json",
				map[string]any{"attestation_name": "tests", "artifact_fingerprint": fpBackend, "is_compliant": compliant}).
				want(t, http.StatusCreated)
			if res := reader.get(assert).want(t, http.StatusOK).JSON(t); res["compliant"] != compliant {
				t.Fatalf("attestation %d (compliant %v): another key's assert right after the 201 answers %v", i, compliant, res)
			}
			if got := reader.get("/attestations/"+testOrg+"/flow-0/trail/t1/tests").want(t, http.StatusOK).Array(t); len(got) != i+1 {
				t.Fatalf("attestation %d: another key lists %d of them", i, len(got))
			}
			if res := anon.get("/artifacts/"+testOrg+"/flow-0/fingerprint/"+fpBackend).want(t, http.StatusOK).JSON(t); res["is_compliant"] != compliant {
				t.Fatalf("attestation %d (compliant %v): an anonymous reader gets the artifact %v", i, compliant, res)
			}
		}
	})
}
