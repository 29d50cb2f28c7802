package snapshot

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// annotations maps "name@fingerprint" to the annotation, for compact expectations.
func annotations(rs []Running) map[string]Annotation {
	m := make(map[string]Annotation, len(rs))
	for _, r := range rs {
		m[r.Name+"@"+r.Fingerprint] = r.Annotation
	}
	return m
}

func TestDiff(t *testing.T) {
	base := []Instance{
		inst("api", "a1", 100, pod("api-1")),
		inst("api", "a1", 110, pod("api-2")),
		inst("web", "w1", 50, pod("web-1")),
	}
	with := func(extra ...Instance) []Instance { return slices.Concat(base, extra) }
	unchanged := func(n int) Annotation { return Annotation{Type: Unchanged, Was: n, Now: n} }

	tests := []struct {
		name           string
		prev, next     []Instance
		includeScaling bool
		wantAnnotated  map[string]Annotation
		wantExited     map[string]Annotation
		wantChanged    bool
	}{
		{
			name: "both empty", prev: nil, next: nil,
			wantAnnotated: map[string]Annotation{}, wantExited: map[string]Annotation{}, wantChanged: false,
		},
		{
			name: "first report", prev: nil, next: base,
			wantAnnotated: map[string]Annotation{"api@a1": {Started, 0, 2}, "web@w1": {Started, 0, 1}},
			wantExited:    map[string]Annotation{}, wantChanged: true,
		},
		{
			name: "start", prev: base, next: with(inst("db", "d1", 200, nil)),
			wantAnnotated: map[string]Annotation{"api@a1": unchanged(2), "web@w1": unchanged(1), "db@d1": {Started, 0, 1}},
			wantExited:    map[string]Annotation{}, wantChanged: true,
		},
		{
			name: "exit", prev: with(inst("db", "d1", 200, nil)), next: base,
			wantAnnotated: map[string]Annotation{"api@a1": unchanged(2), "web@w1": unchanged(1)},
			wantExited:    map[string]Annotation{"db@d1": {Exited, 1, 0}}, wantChanged: true,
		},
		{
			name: "everything exits", prev: base, next: nil,
			wantAnnotated: map[string]Annotation{},
			wantExited:    map[string]Annotation{"api@a1": {Exited, 2, 0}, "web@w1": {Exited, 1, 0}}, wantChanged: true,
		},
		{
			// Same image name, new digest: one exited and one started, never "changed".
			name: "replace digest", prev: base,
			next:          []Instance{inst("api", "a1", 100, nil), inst("api", "a1", 110, nil), inst("web", "w2", 300, nil)},
			wantAnnotated: map[string]Annotation{"api@a1": unchanged(2), "web@w2": {Started, 0, 1}},
			wantExited:    map[string]Annotation{"web@w1": {Exited, 1, 0}}, wantChanged: true,
		},
		{
			name: "scale up", prev: base, next: with(inst("api", "a1", 400, nil)),
			wantAnnotated: map[string]Annotation{"api@a1": {Changed, 2, 3}, "web@w1": unchanged(1)},
			wantExited:    map[string]Annotation{}, wantChanged: true,
		},
		{
			// A count change is a change whatever include_scaling says (the rule).
			name: "scale down without include_scaling", prev: base, next: base[1:],
			wantAnnotated: map[string]Annotation{"api@a1": {Changed, 2, 1}, "web@w1": unchanged(1)},
			wantExited:    map[string]Annotation{}, wantChanged: true,
		},
		{
			name: "scale down with include_scaling", prev: base, next: base[1:], includeScaling: true,
			wantAnnotated: map[string]Annotation{"api@a1": {Changed, 2, 1}, "web@w1": unchanged(1)},
			wantExited:    map[string]Annotation{}, wantChanged: true,
		},
		{
			name: "identical report", prev: base, next: base,
			wantAnnotated: map[string]Annotation{"api@a1": unchanged(2), "web@w1": unchanged(1)},
			wantExited:    map[string]Annotation{}, wantChanged: false,
		},
		{
			name: "identical report with include_scaling", prev: base, next: base, includeScaling: true,
			wantAnnotated: map[string]Annotation{"api@a1": unchanged(2), "web@w1": unchanged(1)},
			wantExited:    map[string]Annotation{}, wantChanged: false,
		},
		{
			// Items in another order, contexts dropped: same pairs, counts and timestamps.
			name: "reorder only", prev: base, includeScaling: true,
			next:          []Instance{inst("web", "w1", 50, nil), inst("api", "a1", 110, nil), inst("api", "a1", 100, nil)},
			wantAnnotated: map[string]Annotation{"api@a1": unchanged(2), "web@w1": unchanged(1)},
			wantExited:    map[string]Annotation{}, wantChanged: false,
		},
		{
			// One api pod replaced at a constant count: not a running-set change by default...
			name: "instances replaced without include_scaling", prev: base,
			next:          []Instance{inst("api", "a1", 100, nil), inst("api", "a1", 500, nil), inst("web", "w1", 50, nil)},
			wantAnnotated: map[string]Annotation{"api@a1": unchanged(2), "web@w1": unchanged(1)},
			wantExited:    map[string]Annotation{}, wantChanged: false,
		},
		{
			// ...but "2 instances changed" (was=now) when the environment includes scaling.
			name: "instances replaced with include_scaling", prev: base, includeScaling: true,
			next:          []Instance{inst("api", "a1", 100, nil), inst("api", "a1", 500, nil), inst("web", "w1", 50, nil)},
			wantAnnotated: map[string]Annotation{"api@a1": {Changed, 2, 2}, "web@w1": unchanged(1)},
			wantExited:    map[string]Annotation{}, wantChanged: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prev, next := Group(tc.prev), Group(tc.next)
			prevCopy, nextCopy := clone(prev), clone(next)
			annotated, exited, changed := Diff(prev, next, tc.includeScaling)
			if got := annotations(annotated); !reflect.DeepEqual(got, tc.wantAnnotated) {
				t.Errorf("annotated = %v, want %v", got, tc.wantAnnotated)
			}
			if got := annotations(exited); !reflect.DeepEqual(got, tc.wantExited) {
				t.Errorf("exited = %v, want %v", got, tc.wantExited)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			// annotated is the new set, in its order, with its instances.
			if len(annotated) != len(next) {
				t.Fatalf("annotated has %d artifacts, next %d", len(annotated), len(next))
			}
			for i := range next {
				a := annotated[i]
				a.Annotation = Annotation{}
				if !reflect.DeepEqual(a, next[i]) {
					t.Errorf("annotated[%d] = %+v, want %+v", i, a, next[i])
				}
			}
			if !reflect.DeepEqual(prev, prevCopy) || !reflect.DeepEqual(next, nextCopy) {
				t.Error("Diff modified its inputs")
			}
		})
	}
}

func clone(rs []Running) []Running {
	out := slices.Clone(rs)
	for i := range out {
		out[i].CreationTimestamps = slices.Clone(out[i].CreationTimestamps)
		out[i].Contexts = slices.Clone(out[i].Contexts)
	}
	return out
}

// Sets not built by Group (unsorted, duplicated keys, unsorted timestamps) are normalized.
func TestDiffUnsortedInput(t *testing.T) {
	prev := []Running{
		{Name: "web", Fingerprint: "w1", Instances: 1, CreationTimestamps: []float64{50}},
		{Name: "api", Fingerprint: "a1", Instances: 1, CreationTimestamps: []float64{110}},
		{Name: "api", Fingerprint: "a1", Instances: 1, CreationTimestamps: []float64{100}},
	}
	next := []Running{
		{Name: "api", Fingerprint: "a1", Instances: 2, CreationTimestamps: []float64{110, 100}},
		{Name: "web", Fingerprint: "w1", Instances: 1, CreationTimestamps: []float64{50}},
	}
	annotated, exited, changed := Diff(prev, next, true)
	if changed || len(exited) != 0 || len(annotated) != 2 ||
		annotated[0].Annotation != (Annotation{Unchanged, 2, 2}) ||
		!slices.Equal(annotated[0].CreationTimestamps, []float64{100, 110}) {
		t.Fatalf("Diff = %+v, %+v, %v", annotated, exited, changed)
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		a    Annotation
		want string
	}{
		// The hosted service's own words (kosli log environment, cyber-dojo aws-prod).
		{Annotation{Started, 0, 3}, "3 instances started running (from 0 to 3)"},
		{Annotation{Started, 0, 1}, "1 instance started running (from 0 to 1)"},
		{Annotation{Exited, 3, 0}, "3 instances stopped running (from 3 to 0)"},
		{Annotation{Exited, 1, 0}, "1 instance stopped running (from 1 to 0)"},
		{Annotation{Changed, 3, 3}, "3 instances changed"},
		{Annotation{Changed, 1, 1}, "1 instance changed"},
		// Count changes, in the same phrase with their real bounds.
		{Annotation{Changed, 1, 3}, "2 instances started running (from 1 to 3)"},
		{Annotation{Changed, 2, 3}, "1 instance started running (from 2 to 3)"},
		{Annotation{Changed, 3, 2}, "1 instance stopped running (from 3 to 2)"},
		{Annotation{Changed, 5, 1}, "4 instances stopped running (from 5 to 1)"},
		{Annotation{Unchanged, 2, 2}, ""},
	}
	for _, tc := range tests {
		if got := Describe(tc.a); got != tc.want {
			t.Errorf("Describe(%+v) = %q, want %q", tc.a, got, tc.want)
		}
	}
}

func TestEvents(t *testing.T) {
	prev := Group([]Instance{
		inst("api", "a1", 1, nil), inst("api", "a1", 2, nil), inst("api", "a1", 3, nil),
		inst("db", "d1", 1, nil),
		inst("web", "w1", 1, nil),
	})
	next := Group([]Instance{
		inst("api", "a1", 1, nil),                            // scaled 3 -> 1
		inst("db", "d1", 1, nil),                             // unchanged
		inst("web", "w2", 9, nil), inst("web", "w2", 9, nil), // w1 replaced by two w2
	})
	annotated, exited, changed := Diff(prev, next, false)
	if !changed {
		t.Fatal("Diff reported no change")
	}
	want := []Event{
		{Type: Changed, Name: "api", Fingerprint: "a1", Description: "2 instances stopped running (from 3 to 1)", Was: 3, Now: 1},
		{Type: Exited, Name: "web", Fingerprint: "w1", Description: "1 instance stopped running (from 1 to 0)", Was: 1, Now: 0},
		{Type: Started, Name: "web", Fingerprint: "w2", Description: "2 instances started running (from 0 to 2)", Was: 0, Now: 2},
	}
	if got := Events(annotated, exited); !reflect.DeepEqual(got, want) {
		t.Fatalf("Events =\n%+v\nwant\n%+v", got, want)
	}
	same, gone, _ := Diff(prev, prev, true)
	if got := Events(same, gone); got != nil {
		t.Fatalf("Events of an unchanged diff = %+v", got)
	}
}

// benchSet is n artifacts of two instances each, like a Kubernetes cluster's report.
func benchSet(n int) []Instance {
	items := make([]Instance, 0, 2*n)
	for i := range n {
		name := fmt.Sprintf("registry.example.com/team/service-%04d:1.0.%d", i, i)
		fp := fmt.Sprintf("%064x", i)
		ctx := map[string]any{"podName": fmt.Sprintf("service-%04d-abc", i), "namespace": "prod"}
		items = append(items, inst(name, fp, float64(1786425000+i), ctx), inst(name, fp, float64(1786425500+i), ctx))
	}
	return items
}

// BenchmarkDiff1000 diffs two sets of 1,000 artifacts of which one scaled.
func BenchmarkDiff1000(b *testing.B) {
	items := benchSet(1000)
	prev := Group(items)
	next := Group(append(slices.Clone(items), inst(items[1000].Name, items[1000].Fingerprint, 1786426000, nil)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		annotated, _, changed := Diff(prev, next, false)
		if !changed || len(annotated) != 1000 {
			b.Fatal("unexpected diff")
		}
	}
}

// BenchmarkGroup1000 folds a report of 1,000 artifacts (2,000 instances) into a running set.
func BenchmarkGroup1000(b *testing.B) {
	items := benchSet(1000)
	slices.Reverse(items) // a reporter's order, not the sorted one
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if len(Group(items)) != 1000 {
			b.Fatal("unexpected group")
		}
	}
}
