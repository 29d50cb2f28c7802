package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// expectedState is the compliance state flowTemplate gives a trail with these attestations
// (name -> is_compliant; every name once): any non-compliant one makes it NON-COMPLIANT,
// else the missing required one INCOMPLETE.
func expectedState(atts map[string]bool) string {
	for _, ok := range atts {
		if !ok {
			return "NON-COMPLIANT"
		}
	}
	if _, ok := atts[buildName]; ok {
		return "COMPLIANT"
	}
	return "INCOMPLETE"
}

// apiTrail is a trail as GET /trails/{org}/{flow}/{trail} shows it.
type apiTrail struct {
	status int
	state  string
	listed map[string]string // attestation name -> status in compliance_status (COMPLETE, MISSING)
	err    string            // a transport error or an undecodable body
}

// readAPI gets every trail named, a few at a time.
func readAPI(ctx context.Context, c *client, names []string) map[string]apiTrail {
	out := make(map[string]apiTrail, len(names))
	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for name := range work {
				t := getTrail(ctx, c, name)
				mu.Lock()
				out[name] = t
				mu.Unlock()
			}
		})
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	return out
}

func getTrail(ctx context.Context, c *client, name string) apiTrail {
	a := c.get(ctx, "/trails/"+c.org+"/"+flowName+"/"+url.PathEscape(name))
	t := apiTrail{status: a.status}
	if a.err != nil {
		t.err = a.err.Error()
		return t
	}
	if a.status != http.StatusOK {
		t.err = clip(a.body, 200)
		return t
	}
	var body struct {
		State  string `json:"compliance_state"`
		Status struct {
			Atts []struct {
				Name   string `json:"attestation_name"`
				Status string `json:"status"`
			} `json:"attestations_statuses"`
		} `json:"compliance_status"`
	}
	if err := json.Unmarshal([]byte(a.body), &body); err != nil {
		t.err = fmt.Sprintf("undecodable trail: %v", err)
		return t
	}
	t.state, t.listed = body.State, map[string]string{}
	for _, s := range body.Status.Atts {
		t.listed[s.Name] = s.Status
	}
	return t
}

// findings gathers problems of a kind with a few examples each.
type findings struct {
	order    []string
	count    map[string]int
	examples map[string][]string
}

func newFindings() *findings {
	return &findings{count: map[string]int{}, examples: map[string][]string{}}
}

func (f *findings) add(kind, example string) {
	if f.count[kind] == 0 {
		f.order = append(f.order, kind)
	}
	f.count[kind]++
	if len(f.examples[kind]) < 5 {
		f.examples[kind] = append(f.examples[kind], example)
	}
}

func (f *findings) problems() []string {
	var out []string
	for _, k := range f.order {
		out = append(out, fmt.Sprintf("%d %s, e.g. %s", f.count[k], k, strings.Join(f.examples[k], "; ")))
	}
	return out
}

// verify checks what the store holds and what the API shows against the ledger: every write
// answered 2xx stored exactly once, one that failed ambiguously at most once, one refused or
// never sent not at all, nothing stored that was not sent, and every stored trail's compliance
// (in the store and through the API) what its stored attestations imply under the template.
func verify(trails map[string]*trailRec, sv storeView, api map[string]apiTrail) (Stored, []string) {
	f := newFindings()
	st := Stored{Attestations: len(sv.atts), Trails: len(sv.trails)}
	type key struct{ trail, name string }
	n := map[key]int{}
	byTrail := map[string]map[string]bool{}
	for _, a := range sv.atts {
		k := key{a.trail, a.name}
		n[k]++
		if n[k] == 2 {
			st.Duplicated++
			f.add("attestations are stored more than once", a.trail+"/"+a.name)
		}
		if byTrail[a.trail] == nil {
			byTrail[a.trail] = map[string]bool{}
		}
		byTrail[a.trail][a.name] = a.compliant
		tr := trails[a.trail]
		if tr == nil || tr.atts[a.name] == nil {
			if n[k] == 1 {
				st.StoredNeverSent++
				f.add("attestations are stored that the load never sent", a.trail+"/"+a.name)
			}
			continue
		}
		if tr.atts[a.name].compliant != a.compliant && n[k] == 1 {
			f.add("attestations are stored with another is_compliant than was sent", a.trail+"/"+a.name)
		}
	}
	names := make([]string, 0, len(trails))
	for name := range trails {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		tr := trails[name]
		if _, ok := sv.trails[name]; tr.begun && !ok {
			f.add("trails answered 201 or 200 are not stored", name)
		}
		attNames := make([]string, 0, len(tr.atts))
		for a := range tr.atts {
			attNames = append(attNames, a)
		}
		sort.Strings(attNames)
		for _, an := range attNames {
			a := tr.atts[an]
			c := n[key{name, an}]
			switch {
			case a.outcome.acknowledged() && c == 0:
				st.Lost++
				f.add("attestations answered 201 are not stored", name+"/"+an)
			case a.outcome.acknowledged() && c == 1:
				st.AcknowledgedStoredOnce++
			case a.outcome.ambiguous() && c == 1:
				st.AmbiguousStored++
			case a.outcome.ambiguous() && c == 0:
				st.AmbiguousNotStored++
			case !a.outcome.acknowledged() && !a.outcome.ambiguous() && c > 0:
				st.StoredButRefused++
				f.add("attestations are stored although their request was refused or never sent",
					fmt.Sprintf("%s/%s (%v, status %d)", name, an, a.outcome, a.status))
			}
		}
	}
	stored := make([]string, 0, len(sv.trails))
	for name := range sv.trails {
		stored = append(stored, name)
	}
	sort.Strings(stored)
	for _, name := range stored {
		if tr := trails[name]; tr == nil || (!tr.begun && !tr.maybe) {
			f.add("trails are stored that no request may have created", name)
		}
		atts := byTrail[name]
		want := expectedState(atts)
		got := api[name]
		st.TrailsChecked++
		switch {
		case got.status != http.StatusOK || got.err != "":
			st.ComplianceMismatches++
			f.add("stored trails cannot be read through the API", fmt.Sprintf("%s: %d %s", name, got.status, got.err))
		case got.state != want || sv.trails[name] != want:
			st.ComplianceMismatches++
			f.add("trails have another compliance state than their stored attestations imply",
				fmt.Sprintf("%s: API %s, store %s, want %s from %d attestations", name, got.state, sv.trails[name], want, len(atts)))
		default:
			if diff := listedDiff(atts, got.listed); diff != "" {
				st.ComplianceMismatches++
				f.add("trails' compliance lists other attestations than are stored", name+": "+diff)
			}
		}
	}
	return st, f.problems()
}

// listedDiff compares a trail's compliance_status with its stored attestations.
func listedDiff(stored map[string]bool, listed map[string]string) string {
	var d []string
	for name := range stored {
		if listed[name] != "COMPLETE" {
			d = append(d, fmt.Sprintf("%s stored but listed %q", name, listed[name]))
		}
	}
	for name, status := range listed {
		if _, ok := stored[name]; !ok && !(name == buildName && status == "MISSING") {
			d = append(d, fmt.Sprintf("%s listed %s but not stored", name, status))
		}
	}
	sort.Strings(d)
	return strings.Join(d, ", ")
}

// ackedNotStored counts the attestations answered 201 that the store does not hold.
func ackedNotStored(trails map[string]*trailRec, sv storeView) int {
	type key struct{ trail, name string }
	have := make(map[key]bool, len(sv.atts))
	for _, a := range sv.atts {
		have[key{a.trail, a.name}] = true
	}
	n := 0
	for name, tr := range trails {
		for an, a := range tr.atts {
			if a.outcome.acknowledged() && !have[key{name, an}] {
				n++
			}
		}
	}
	return n
}
