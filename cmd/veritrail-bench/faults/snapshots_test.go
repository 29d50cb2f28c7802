package faults

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/cmd/veritrail-bench/k8spod"
)

// fakeArt is an artifact of a fake snapshot, as GET /snapshots shows it.
type fakeArt struct {
	Name        string     `json:"name"`
	Fingerprint string     `json:"fingerprint"`
	Compliant   *bool      `json:"compliant"`
	Instances   int        `json:"instances"`
	Flows       []fakeFlow `json:"flows"`
}

type fakeFlow struct {
	FlowName  string `json:"flow_name"`
	TrailName string `json:"trail_name"`
	State     string `json:"state"`
}

// snapFixture is two artifacts, in a COMPLIANT and a NON-COMPLIANT trail, and two environments
// whose final snapshots show both right.
func snapFixture() ([]snapArtifact, map[string][]fakeArt, map[string]apiTrail) {
	want := snapSet()[:2]
	trails := map[string]apiTrail{
		want[0].trail: {status: 200, state: "COMPLIANT"},
		want[1].trail: {status: 200, state: "NON-COMPLIANT"},
	}
	yes, no := true, false
	arts := func() []fakeArt {
		return []fakeArt{
			{want[0].name, want[0].fingerprint, &yes, snapFinalReplicas, []fakeFlow{{flowName, want[0].trail, "COMPLIANT"}}},
			{want[1].name, want[1].fingerprint, &no, snapFinalReplicas, []fakeFlow{{flowName, want[1].trail, "NON-COMPLIANT"}}},
		}
	}
	return want, map[string][]fakeArt{"env-a": arts(), "env-b": arts()}, trails
}

func finalSnapshots(t *testing.T, envs map[string][]fakeArt) []finalSnapshot {
	t.Helper()
	var out []finalSnapshot
	for _, env := range []string{"env-a", "env-b"} {
		arts, ok := envs[env]
		if !ok {
			out = append(out, finalSnapshot{env: env, err: "404 not found"})
			continue
		}
		b, err := json.Marshal(map[string]any{"index": 7, "artifacts": arts})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, finalSnapshot{env: env, appeared: true, body: string(b)})
	}
	return out
}

func TestVerifySnapshots(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name   string
		break_ func(envs map[string][]fakeArt, trails map[string]apiTrail)
		want   []string
		wrong  int
		miss   int
		envs   int
	}{
		{name: "right", break_: func(map[string][]fakeArt, map[string]apiTrail) {}, envs: 2},
		{name: "a stale artifact carried over", break_: func(envs map[string][]fakeArt, _ map[string]apiTrail) {
			a := &envs["env-b"][1] // its trail turned NON-COMPLIANT since the snapshot it was carried from
			a.Compliant, a.Flows[0].State = &yes, "COMPLIANT"
		}, want: []string{
			"1 snapshot artifacts show another compliance than their trail (stale), e.g. env-b#7 registry.example.com/faults/service-01:1.0.1: compliant true, trail snap-01 is NON-COMPLIANT",
			"1 snapshot artifacts show another state of their trail than the trail has (stale), e.g. env-b#7 registry.example.com/faults/service-01:1.0.1: COMPLIANT in the snapshot, snap-01 is NON-COMPLIANT",
		}, wrong: 1, envs: 2},
		{name: "a stale compliance only", break_: func(envs map[string][]fakeArt, _ map[string]apiTrail) {
			envs["env-a"][0].Compliant = &no
		}, want: []string{
			"1 snapshot artifacts show another compliance than their trail (stale), e.g. env-a#7 registry.example.com/faults/service-00:1.0.0: compliant false, trail snap-00 is COMPLIANT",
		}, wrong: 1, envs: 2},
		{name: "the trails changed after the snapshots", break_: func(_ map[string][]fakeArt, trails map[string]apiTrail) {
			trails["snap-00"] = apiTrail{status: 200, state: "INCOMPLETE"}
		}, want: []string{
			"2 snapshot artifacts show another compliance than their trail (stale), e.g. env-a#7 registry.example.com/faults/service-00:1.0.0: compliant true, trail snap-00 is INCOMPLETE; env-b#7 registry.example.com/faults/service-00:1.0.0: compliant true, trail snap-00 is INCOMPLETE",
			"2 snapshot artifacts show another state of their trail than the trail has (stale), e.g. env-a#7 registry.example.com/faults/service-00:1.0.0: COMPLIANT in the snapshot, snap-00 is INCOMPLETE; env-b#7 registry.example.com/faults/service-00:1.0.0: COMPLIANT in the snapshot, snap-00 is INCOMPLETE",
		}, wrong: 2, envs: 2},
		{name: "an unknown compliance", break_: func(envs map[string][]fakeArt, _ map[string]apiTrail) {
			envs["env-a"][1].Compliant = nil
		}, want: []string{
			"1 snapshot artifacts show another compliance than their trail (stale), e.g. env-a#7 registry.example.com/faults/service-01:1.0.1: compliant null, trail snap-01 is NON-COMPLIANT",
		}, wrong: 1, envs: 2},
		{name: "no provenance", break_: func(envs map[string][]fakeArt, _ map[string]apiTrail) {
			envs["env-a"][1].Flows = nil
		}, want: []string{"1 snapshot artifacts show no provenance, e.g. env-a#7 registry.example.com/faults/service-01:1.0.1"}, wrong: 1, envs: 2},
		{name: "another trail", break_: func(envs map[string][]fakeArt, _ map[string]apiTrail) {
			envs["env-a"][1].Flows[0].TrailName = "snap-00"
		}, want: []string{
			"1 snapshot artifacts show another provenance than their trail, e.g. env-a#7 registry.example.com/faults/service-01:1.0.1: faults/snap-00, want faults/snap-01",
		}, wrong: 1, envs: 2},
		{name: "another instance count", break_: func(envs map[string][]fakeArt, _ map[string]apiTrail) {
			envs["env-b"][0].Instances = 2
		}, want: []string{
			"1 final snapshot artifacts show another instance count than the final report, e.g. env-b#7 registry.example.com/faults/service-00:1.0.0: 2, want 3",
		}, wrong: 1, envs: 2},
		{name: "a missing artifact", break_: func(envs map[string][]fakeArt, _ map[string]apiTrail) {
			envs["env-a"] = envs["env-a"][:1]
		}, want: []string{
			"1 artifacts of the final report are missing from its snapshot, e.g. env-a#7 registry.example.com/faults/service-01:1.0.1",
		}, miss: 1, envs: 2},
		{name: "an artifact never reported", break_: func(envs map[string][]fakeArt, _ map[string]apiTrail) {
			envs["env-a"] = append(envs["env-a"], fakeArt{Name: "ghost", Fingerprint: k8spod.Hash("ghost"), Instances: 3})
		}, want: []string{
			"1 final snapshots show artifacts that were not reported (or twice), e.g. env-a#7 ghost",
		}, wrong: 1, envs: 2},
		{name: "a final snapshot that never appeared", break_: func(envs map[string][]fakeArt, _ map[string]apiTrail) {
			delete(envs, "env-b")
		}, want: []string{"1 final snapshots never appeared, e.g. env-b: 404 not found"}, envs: 1},
		{name: "a trail the API cannot read", break_: func(_ map[string][]fakeArt, trails map[string]apiTrail) {
			trails["snap-01"] = apiTrail{status: 503, err: "unavailable"}
		}, want: []string{
			"2 snapshot artifacts' trails cannot be read through the API, e.g. env-a#7 registry.example.com/faults/service-01:1.0.1: snap-01 503 unavailable; env-b#7 registry.example.com/faults/service-01:1.0.1: snap-01 503 unavailable",
		}, wrong: 2, envs: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, envs, trails := snapFixture()
			c.break_(envs, trails)
			st, problems := verifySnapshots(want, finalSnapshots(t, envs), trails)
			if strings.Join(problems, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(problems, "\n  "), strings.Join(c.want, "\n  "))
			}
			if st.Wrong != c.wrong || st.Missing != c.miss || st.EnvironmentsChecked != c.envs {
				t.Errorf("%d wrong, %d missing, %d environments checked; want %d, %d, %d", st.Wrong, st.Missing, st.EnvironmentsChecked,
					c.wrong, c.miss, c.envs)
			}
		})
	}
}

// TestVerifySnapshotsJudged: in an environment with the policy attached, an artifact without a
// policy decision is wrong; with one, it is checked as in any other.
func TestVerifySnapshotsJudged(t *testing.T) {
	want, envs, trails := snapFixture()
	snaps := finalSnapshots(t, envs)
	snaps[0].judged = true
	st, problems := verifySnapshots(want, snaps, trails)
	if st.Wrong != 2 || len(problems) != 1 ||
		!strings.HasPrefix(problems[0], "2 snapshot artifacts of environments with a policy show no policy decision, e.g. env-a#7") {
		t.Errorf("%d wrong, problems %q; want 2 and the missing decisions of env-a", st.Wrong, problems)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(snaps[0].body), &doc); err != nil {
		t.Fatal(err)
	}
	for _, a := range doc["artifacts"].([]any) {
		a.(map[string]any)["policy_decisions"] = []any{map[string]any{"policy_name": snapPolicy}}
	}
	b, _ := json.Marshal(doc)
	snaps[0].body = string(b)
	if st, problems := verifySnapshots(want, snaps, trails); st.Wrong != 0 || len(problems) != 0 {
		t.Errorf("with decisions: %d wrong, problems %q", st.Wrong, problems)
	}
}

func TestVerifySnapshotsUndecodable(t *testing.T) {
	want, _, trails := snapFixture()
	_, problems := verifySnapshots(want, []finalSnapshot{{env: "env-a", appeared: true, body: "{"}}, trails)
	if len(problems) != 1 || !strings.HasPrefix(problems[0], "1 final snapshots cannot be decoded, e.g. env-a: ") {
		t.Errorf("problems: %q", problems)
	}
}

// TestK8SReport checks the reports' running sets: replicas pods of each artifact, and a final
// report that showsFinal recognises once the snapshot shows it.
func TestK8SReport(t *testing.T) {
	arts := snapSet()
	replicas := make([]int, len(arts))
	replicas[0], replicas[5] = 2, 1
	var body struct {
		Artifacts []k8spod.Pod `json:"artifacts"`
	}
	if err := json.Unmarshal(k8sReport(arts, replicas), &body); err != nil {
		t.Fatal(err)
	}
	pods := map[string]int{}
	names := map[string]bool{}
	for _, p := range body.Artifacts {
		for _, fp := range p.Digests {
			pods[fp]++
		}
		names[p.PodName] = true
	}
	if len(body.Artifacts) != 3 || pods[arts[0].fingerprint] != 2 || pods[arts[5].fingerprint] != 1 || len(names) != 3 {
		t.Errorf("pods %v, names %v", pods, names)
	}
	if showsFinal(`{"artifacts":[]}`) || showsFinal(`{"artifacts":[{"instances":3},{"instances":2}]}`) ||
		!showsFinal(`{"artifacts":[{"instances":3},{"instances":3}]}`) {
		t.Error("showsFinal recognises another snapshot than the final report's")
	}
}
