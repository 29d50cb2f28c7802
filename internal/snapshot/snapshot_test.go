package snapshot

import (
	"reflect"
	"slices"
	"testing"
)

func inst(name, fp string, ts float64, ctx map[string]any) Instance {
	return Instance{Name: name, Fingerprint: fp, CreationTimestamp: ts, Context: ctx}
}

func pod(name string) map[string]any { return map[string]any{"podName": name, "namespace": "prod"} }

func TestExpand(t *testing.T) {
	ctx := pod("web-1")
	got := Expand(map[string]string{"sidecar": "bb", "app": "aa"}, 100, ctx)
	want := []Instance{inst("app", "aa", 100, ctx), inst("sidecar", "bb", 100, ctx)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Expand = %+v, want %+v", got, want)
	}
	if got := Expand(nil, 0, nil); len(got) != 0 {
		t.Fatalf("Expand(nil) = %+v", got)
	}
}

func TestGroup(t *testing.T) {
	web1, web2 := pod("web-1"), pod("web-2")
	tests := []struct {
		name  string
		items []Instance
		want  []Running
	}{
		{name: "empty", items: nil, want: nil},
		{
			name:  "one item",
			items: []Instance{inst("nginx", "aa", 10, nil)},
			want:  []Running{{Name: "nginx", Fingerprint: "aa", Instances: 1, CreationTimestamps: []float64{10}}},
		},
		{
			// Two pods, each with an app and a sidecar container: two artifacts of two instances.
			name: "several digests per item",
			items: slices.Concat(
				Expand(map[string]string{"app": "aa", "sidecar": "ss"}, 20, web2),
				Expand(map[string]string{"app": "aa", "sidecar": "ss"}, 10, web1),
			),
			want: []Running{
				{Name: "app", Fingerprint: "aa", Instances: 2, CreationTimestamps: []float64{10, 20}, Contexts: []map[string]any{web1, web2}},
				{Name: "sidecar", Fingerprint: "ss", Instances: 2, CreationTimestamps: []float64{10, 20}, Contexts: []map[string]any{web1, web2}},
			},
		},
		{
			// The same item twice (ECS lists three tasks of one image alike): instances add up.
			name:  "duplicates",
			items: []Instance{inst("runner", "rr", 5, nil), inst("runner", "rr", 5, nil), inst("runner", "rr", 5, nil)},
			want:  []Running{{Name: "runner", Fingerprint: "rr", Instances: 3, CreationTimestamps: []float64{5, 5, 5}}},
		},
		{
			name:  "same fingerprint under two names is two artifacts",
			items: []Instance{inst("app:v2", "aa", 1, nil), inst("app:latest", "aa", 2, nil)},
			want: []Running{
				{Name: "app:latest", Fingerprint: "aa", Instances: 1, CreationTimestamps: []float64{2}},
				{Name: "app:v2", Fingerprint: "aa", Instances: 1, CreationTimestamps: []float64{1}},
			},
		},
		{
			name:  "same name, two digests is two artifacts",
			items: []Instance{inst("app", "bb", 1, nil), inst("app", "aa", 2, nil)},
			want: []Running{
				{Name: "app", Fingerprint: "aa", Instances: 1, CreationTimestamps: []float64{2}},
				{Name: "app", Fingerprint: "bb", Instances: 1, CreationTimestamps: []float64{1}},
			},
		},
		{
			// Contexts stay paired with their timestamps; unknown timestamps (0) sort first.
			name:  "unsorted with partial contexts",
			items: []Instance{inst("web", "ww", 30, web2), inst("web", "ww", 0, nil), inst("web", "ww", 10, web1)},
			want: []Running{{Name: "web", Fingerprint: "ww", Instances: 3,
				CreationTimestamps: []float64{0, 10, 30}, Contexts: []map[string]any{nil, web1, web2}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.items)
			got := Group(tc.items)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Group =\n%+v\nwant\n%+v", got, tc.want)
			}
			if !reflect.DeepEqual(tc.items, before) {
				t.Fatal("Group modified its input")
			}
		})
	}
}

// The runner artifact of the hosted example snapshot (kosli_get_snapshot.json): three ECS
// tasks of one image, reported in any order, are one artifact with sorted timestamps.
func TestGroupHostedRunner(t *testing.T) {
	const name = "244531986313.dkr.ecr.eu-central-1.amazonaws.com/runner:85cac88@sha256:f3cdc22a599ddb789e7791389a5a58b43fd9c30d3af079aec392d5962d181096"
	const fp = "f3cdc22a599ddb789e7791389a5a58b43fd9c30d3af079aec392d5962d181096"
	task := func(arn string) map[string]any { return map[string]any{"taskArn": arn} }
	got := Group([]Instance{
		inst(name, fp, 1786425514, task("c")),
		inst(name, fp, 1786425437, task("a")),
		inst(name, fp, 1786425461, task("b")),
	})
	if len(got) != 1 || got[0].Instances != 3 ||
		!slices.Equal(got[0].CreationTimestamps, []float64{1786425437, 1786425461, 1786425514}) ||
		got[0].Contexts[0]["taskArn"] != "a" || got[0].Contexts[2]["taskArn"] != "c" {
		t.Fatalf("Group = %+v", got)
	}
}

// Appending to one artifact's timestamps must not overwrite the next artifact's.
func TestGroupSlicesAreCapped(t *testing.T) {
	got := Group([]Instance{inst("a", "1", 1, nil), inst("b", "2", 2, nil)})
	_ = append(got[0].CreationTimestamps, 99)
	if got[1].CreationTimestamps[0] != 2 {
		t.Fatalf("append ran into the next artifact: %v", got[1].CreationTimestamps)
	}
}

func TestUnion(t *testing.T) {
	eu, us := pod("eu-1"), pod("us-1")
	clusterEU := Group([]Instance{inst("api", "aa", 20, eu), inst("db", "dd", 5, nil)})
	clusterUS := Group([]Instance{inst("api", "aa", 10, us), inst("api", "aa", 30, us), inst("web", "ww", 7, nil)})
	clusterEU[0].Annotation = Annotation{Type: Changed, Was: 1, Now: 1}

	tests := []struct {
		name string
		sets [][]Running
		want []Running
	}{
		{name: "no members", sets: nil, want: nil},
		{name: "empty members", sets: [][]Running{nil, {}}, want: nil},
		{
			name: "instances in two members add up",
			sets: [][]Running{clusterEU, clusterUS},
			want: []Running{
				{Name: "api", Fingerprint: "aa", Instances: 3, CreationTimestamps: []float64{10, 20, 30}, Contexts: []map[string]any{us, eu, us}},
				{Name: "db", Fingerprint: "dd", Instances: 1, CreationTimestamps: []float64{5}},
				{Name: "web", Fingerprint: "ww", Instances: 1, CreationTimestamps: []float64{7}},
			},
		},
		{
			name: "one member is itself without annotations",
			sets: [][]Running{clusterEU},
			want: []Running{
				{Name: "api", Fingerprint: "aa", Instances: 1, CreationTimestamps: []float64{20}, Contexts: []map[string]any{eu}},
				{Name: "db", Fingerprint: "dd", Instances: 1, CreationTimestamps: []float64{5}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Union(tc.sets...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Union =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}

	// The union shares no memory with its members.
	u := Union(clusterEU, clusterUS)
	u[1].CreationTimestamps[0] = -1
	if clusterEU[1].CreationTimestamps[0] != 5 {
		t.Fatal("Union aliases a member's timestamps")
	}
	// Argument order does not change the result.
	if !reflect.DeepEqual(Union(clusterUS, clusterEU), Union(clusterEU, clusterUS)) {
		t.Fatal("Union depends on member order")
	}
}
