package faults

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		status int
		want   outcome
	}{
		{201, created}, {200, updated}, {400, refused}, {404, refused}, {429, limited}, {500, failed}, {503, failed}, {302, failed},
	} {
		if got := classify(c.status, nil); got != c.want {
			t.Errorf("status %d: %v, want %v", c.status, got, c.want)
		}
	}
	if got := classify(0, errors.New("timeout")); got != broken {
		t.Errorf("a transport error: %v, want %v", got, broken)
	}

	// A refused connection sent nothing; a connection cut after the request was read may have.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	c := newClient(closed, "o", "k", 1)
	if a := c.get(t.Context(), "/"); classify(a.status, a.err) != unsent {
		t.Errorf("refused connection: %v (%v), want not sent", classify(a.status, a.err), a.err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	c = newClient(srv.URL, "o", "k", 1)
	if a := c.multipart(t.Context(), http.MethodPost, "/", map[string]any{}, "", "", nil); classify(a.status, a.err) != broken {
		t.Errorf("connection cut after the request: %v (%v), want connection error", classify(a.status, a.err), a.err)
	}
}

func TestExpectedState(t *testing.T) {
	for _, c := range []struct {
		atts map[string]bool
		want string
	}{
		{nil, "INCOMPLETE"},
		{map[string]bool{"x": true}, "INCOMPLETE"},
		{map[string]bool{"x": false}, "NON-COMPLIANT"},
		{map[string]bool{buildName: true}, "COMPLIANT"},
		{map[string]bool{buildName: true, "x": true}, "COMPLIANT"},
		{map[string]bool{buildName: false, "x": true}, "NON-COMPLIANT"},
		{map[string]bool{buildName: true, "x": false}, "NON-COMPLIANT"},
	} {
		if got := expectedState(c.atts); got != c.want {
			t.Errorf("%v: %s, want %s", c.atts, got, c.want)
		}
	}
}

// TestPlanTrailCoversEveryState checks that the writers' plans give trails of every
// compliance state and never repeat a name within a trail.
func TestPlanTrailCoversEveryState(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	states := map[string]int{}
	for i := range 200 {
		trail := "t" + string(rune('a'+i%26))
		seen := map[string]bool{}
		atts := map[string]bool{}
		for _, a := range planTrail(rng, trail) {
			if seen[a.name] {
				t.Fatalf("%s: %s planned twice", trail, a.name)
			}
			seen[a.name] = true
			atts[a.name] = a.compliant
		}
		states[expectedState(atts)]++
	}
	for _, s := range []string{"COMPLIANT", "NON-COMPLIANT", "INCOMPLETE"} {
		if states[s] == 0 {
			t.Errorf("no plan gives %s: %v", s, states)
		}
	}
}

// A clean run: what was acknowledged is stored once, and the API agrees.
func cleanRun() (map[string]*trailRec, storeView, map[string]apiTrail) {
	trails := map[string]*trailRec{
		"t1": {begun: true, atts: map[string]*attRec{
			buildName: {compliant: true, outcome: created, status: 201},
			"t1-a0":   {compliant: true, outcome: created, status: 201},
			"t1-a1":   {compliant: true, outcome: broken},              // ambiguous, not stored
			"t1-a2":   {compliant: true, outcome: unsent},              // never sent
			"t1-a3":   {compliant: true, outcome: failed, status: 503}, // ambiguous, stored
		}},
		"t2": {begun: true, atts: map[string]*attRec{"t2-a0": {compliant: false, outcome: created, status: 201}}},
		"t3": {maybe: true}, // its begin failed ambiguously and was applied
	}
	sv := storeView{
		atts:   []storedAtt{{"t1", buildName, true}, {"t1", "t1-a0", true}, {"t1", "t1-a3", true}, {"t2", "t2-a0", false}},
		trails: map[string]string{"t1": "COMPLIANT", "t2": "NON-COMPLIANT", "t3": "INCOMPLETE"},
	}
	api := map[string]apiTrail{
		"t1": {status: 200, state: "COMPLIANT", listed: map[string]string{buildName: "COMPLETE", "t1-a0": "COMPLETE", "t1-a3": "COMPLETE"}},
		"t2": {status: 200, state: "NON-COMPLIANT", listed: map[string]string{buildName: "MISSING", "t2-a0": "COMPLETE"}},
		"t3": {status: 200, state: "INCOMPLETE", listed: map[string]string{buildName: "MISSING"}},
	}
	return trails, sv, api
}

func TestVerifyPassesACleanRun(t *testing.T) {
	trails, sv, api := cleanRun()
	st, problems := verify(trails, sv, api)
	if len(problems) > 0 {
		t.Fatalf("problems in a clean run: %v", problems)
	}
	want := Stored{Attestations: 4, AcknowledgedStoredOnce: 3, AmbiguousStored: 1, AmbiguousNotStored: 1, Trails: 3, TrailsChecked: 3}
	if st != want {
		t.Errorf("stored %+v, want %+v", st, want)
	}
}

// TestVerifyFindsEachProblem breaks a clean run one way at a time: each must be reported.
func TestVerifyFindsEachProblem(t *testing.T) {
	for _, c := range []struct {
		name   string
		break_ func(map[string]*trailRec, *storeView, map[string]apiTrail)
		want   string
	}{
		{"a 201 lost", func(_ map[string]*trailRec, sv *storeView, api map[string]apiTrail) {
			sv.atts = sv.atts[1:] // t1/build
			sv.trails["t1"] = "INCOMPLETE"
			api["t1"] = apiTrail{status: 200, state: "INCOMPLETE", listed: map[string]string{buildName: "MISSING", "t1-a0": "COMPLETE", "t1-a3": "COMPLETE"}}
		}, "1 attestations answered 201 are not stored, e.g. t1/build"},
		{"a 201 stored twice", func(_ map[string]*trailRec, sv *storeView, _ map[string]apiTrail) {
			sv.atts = append(sv.atts, storedAtt{"t1", "t1-a0", true})
		}, "1 attestations are stored more than once, e.g. t1/t1-a0"},
		{"an ambiguous one stored twice", func(_ map[string]*trailRec, sv *storeView, _ map[string]apiTrail) {
			sv.atts = append(sv.atts, storedAtt{"t1", "t1-a3", true})
		}, "1 attestations are stored more than once, e.g. t1/t1-a3"},
		{"one never sent is stored", func(_ map[string]*trailRec, sv *storeView, api map[string]apiTrail) {
			sv.atts = append(sv.atts, storedAtt{"t1", "t1-a2", true})
			api["t1"].listed["t1-a2"] = "COMPLETE"
		}, "1 attestations are stored although their request was refused or never sent, e.g. t1/t1-a2 (not sent, status 0)"},
		{"one nobody sent is stored", func(_ map[string]*trailRec, sv *storeView, api map[string]apiTrail) {
			sv.atts = append(sv.atts, storedAtt{"t1", "ghost", true})
			api["t1"].listed["ghost"] = "COMPLETE"
		}, "1 attestations are stored that the load never sent, e.g. t1/ghost"},
		{"another is_compliant", func(_ map[string]*trailRec, sv *storeView, api map[string]apiTrail) {
			sv.atts[1].compliant = false
			sv.trails["t1"] = "NON-COMPLIANT"
			api["t1"] = apiTrail{status: 200, state: "NON-COMPLIANT", listed: api["t1"].listed}
		}, "1 attestations are stored with another is_compliant than was sent, e.g. t1/t1-a0"},
		{"a trail nobody created", func(_ map[string]*trailRec, sv *storeView, api map[string]apiTrail) {
			sv.trails["t4"] = "INCOMPLETE"
			api["t4"] = apiTrail{status: 200, state: "INCOMPLETE", listed: map[string]string{buildName: "MISSING"}}
		}, "1 trails are stored that no request may have created, e.g. t4"},
		{"a trail answered 201 missing", func(trails map[string]*trailRec, sv *storeView, _ map[string]apiTrail) {
			trails["t5"] = &trailRec{begun: true, atts: map[string]*attRec{}}
		}, "1 trails answered 201 or 200 are not stored, e.g. t5"},
		{"a stale compliance through the API", func(_ map[string]*trailRec, _ *storeView, api map[string]apiTrail) {
			api["t2"] = apiTrail{status: 200, state: "INCOMPLETE", listed: api["t2"].listed}
		}, "1 trails have another compliance state than their stored attestations imply, e.g. t2: API INCOMPLETE, store NON-COMPLIANT, want NON-COMPLIANT from 1 attestations"},
		{"a stale compliance in the store", func(_ map[string]*trailRec, sv *storeView, _ map[string]apiTrail) {
			sv.trails["t1"] = "INCOMPLETE"
		}, "1 trails have another compliance state than their stored attestations imply, e.g. t1: API COMPLIANT, store INCOMPLETE, want COMPLIANT from 3 attestations"},
		{"an attestation missing from the compliance", func(_ map[string]*trailRec, _ *storeView, api map[string]apiTrail) {
			delete(api["t1"].listed, "t1-a0")
		}, `1 trails' compliance lists other attestations than are stored, e.g. t1: t1-a0 stored but listed ""`},
		{"a trail the API cannot read", func(_ map[string]*trailRec, _ *storeView, api map[string]apiTrail) {
			api["t3"] = apiTrail{status: 404, err: "not found"}
		}, "1 stored trails cannot be read through the API, e.g. t3: 404 not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			trails, sv, api := cleanRun()
			c.break_(trails, &sv, api)
			_, problems := verify(trails, sv, api)
			if len(problems) != 1 || problems[0] != c.want {
				t.Errorf("problems:\n  %s\nwant exactly:\n  %s", strings.Join(problems, "\n  "), c.want)
			}
		})
	}
}

func TestAckedNotStored(t *testing.T) {
	trails, sv, _ := cleanRun()
	if n := ackedNotStored(trails, sv); n != 0 {
		t.Errorf("%d missing in a clean run", n)
	}
	sv.atts = sv.atts[2:]
	if n := ackedNotStored(trails, sv); n != 2 {
		t.Errorf("%d missing, want 2", n)
	}
}
