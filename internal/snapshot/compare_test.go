package snapshot

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"testing"
)

// hostedArtifact is an env-diff artifact as the hosted service serves it.
type hostedArtifact struct {
	Fingerprint         string `json:"fingerprint"`
	Name                string `json:"name"`
	MostRecentTimestamp int64  `json:"most_recent_timestamp"`
	Flow                string `json:"flow"`
	CommitURL           string `json:"commit_url"`
	InstanceCount       int    `json:"instance_count"`
}

// TestCompareHostedExample rebuilds the two running sets behind the hosted env-diff of
// aws-beta#8099 and aws-prod#5253 (testdata/kosli_diff_snapshots.json, served by the hosted
// service) and checks that Compare serves the same document: keys, order, values.
func TestCompareHostedExample(t *testing.T) {
	raw, err := os.ReadFile("testdata/kosli_diff_snapshots.json")
	if err != nil {
		t.Fatal(err)
	}
	var hosted struct {
		Snappish1  struct{ Artifacts []hostedArtifact } `json:"snappish1"`
		Snappish2  struct{ Artifacts []hostedArtifact } `json:"snappish2"`
		NotChanged struct{ Artifacts []hostedArtifact } `json:"not-changed"`
	}
	if err := json.Unmarshal(raw, &hosted); err != nil {
		t.Fatal(err)
	}

	// Each artifact runs instance_count instances, the latest started at most_recent_timestamp.
	prov := map[string][2]string{}
	var beta, prod []Instance
	add := func(dst *[]Instance, a hostedArtifact) {
		prov[a.Name+"@"+a.Fingerprint] = [2]string{a.Flow, a.CommitURL}
		for i := range a.InstanceCount {
			ts := float64(a.MostRecentTimestamp - int64(60*i))
			*dst = append(*dst, inst(a.Name, a.Fingerprint, ts, map[string]any{"taskArn": "t"}))
		}
	}
	for _, a := range hosted.Snappish1.Artifacts {
		add(&beta, a)
	}
	for _, a := range hosted.Snappish2.Artifacts {
		add(&prod, a)
	}
	for _, a := range hosted.NotChanged.Artifacts {
		add(&beta, a)
		add(&prod, a)
	}
	slices.Reverse(prod) // a reporter's order is not the served order

	got := Compare(Group(beta), Group(prod), CompareOptions{
		Snapshot1: SnapshotID("aws-beta", 8099),
		Snapshot2: SnapshotID("aws-prod", 5253),
		Provenance: func(name, fp string) (string, string) {
			p := prov[name+"@"+fp]
			return p[0], p[1]
		},
	})
	body, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var gotDoc, wantDoc any
	if err := json.Unmarshal(body, &gotDoc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &wantDoc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotDoc, wantDoc) {
		t.Fatalf("Compare served\n%s\nwant the hosted document\n%s", body, raw)
	}
}

func TestCompare(t *testing.T) {
	a := Group([]Instance{
		inst("api", "bb", 100, nil), inst("api", "bb", 200, nil), // scales to 3 in b
		inst("db", "dd", 50, nil),  // not changed
		inst("web", "w1", 70, nil), // replaced by w2 in b
	})
	b := Group([]Instance{
		inst("api", "bb", 100, nil), inst("api", "bb", 200, nil), inst("api", "bb", 300.7, nil),
		inst("db", "dd", 50, nil),
		inst("web", "w2", 80, nil),
		inst("cache", "aa", 0, nil), // creation time unknown
	})
	got := Compare(a, b, CompareOptions{Snapshot1: "prod#1", Snapshot2: "prod#2"})
	body, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	want := `{` +
		`"snappish1":{"snapshot_id":"prod#1","artifacts":[` +
		`{"fingerprint":"w1","name":"web","most_recent_timestamp":70,"flow":null,"commit_url":null,"instance_count":1}]},` +
		`"snappish2":{"snapshot_id":"prod#2","artifacts":[` +
		`{"fingerprint":"aa","name":"cache","most_recent_timestamp":0,"flow":null,"commit_url":null,"instance_count":1},` +
		`{"fingerprint":"w2","name":"web","most_recent_timestamp":80,"flow":null,"commit_url":null,"instance_count":1}]},` +
		`"changed":{"artifacts":[` +
		`{"fingerprint":"bb","name":"api","most_recent_timestamp":300,"flow":null,"commit_url":null,"s1_instance_count":2,"s2_instance_count":3}]},` +
		`"not-changed":{"artifacts":[` +
		`{"fingerprint":"dd","name":"db","most_recent_timestamp":50,"flow":null,"commit_url":null,"instance_count":1}]}}`
	if string(body) != want {
		t.Fatalf("Compare =\n%s\nwant\n%s", body, want)
	}

	// Identical snapshots: everything not-changed, and empty lists are arrays, not null.
	body, err = json.Marshal(Compare(a, a, CompareOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"snappish1", "snappish2", "changed"} {
		if arts, ok := doc[k]["artifacts"].([]any); !ok || len(arts) != 0 {
			t.Errorf("%s.artifacts = %#v, want []", k, doc[k]["artifacts"])
		}
	}
	if arts := doc["not-changed"]["artifacts"].([]any); len(arts) != 3 {
		t.Errorf("not-changed has %d artifacts, want 3", len(arts))
	}
}

func TestOptionalRoundTrip(t *testing.T) {
	var d DiffArtifact
	if err := json.Unmarshal([]byte(`{"flow":null,"commit_url":"https://x"}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Flow != "" || d.CommitURL != "https://x" {
		t.Fatalf("decoded %+v", d)
	}
}
