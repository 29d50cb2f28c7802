package snapshot

import (
	"slices"
	"strconv"
)

// Diff compares the previous snapshot's running set with the new one (both as Group or Union
// return them; other input is sorted first). It returns the new set annotated (started,
// changed or unchanged), the artifacts that exited (in prev, not in next; annotated exited,
// was=N now=0) and whether anything changed at all. When nothing changed the caller creates no
// new snapshot. includeScaling is the environment's include_scaling: when true, instances
// replaced at a constant count (different creation timestamps) count as changed too; a change
// of instance count always does (see the package documentation).
//
// The inputs are not modified; annotated is a new slice whose entries share their timestamp
// and context slices with next.
func Diff(prev, next []Running, includeScaling bool) (annotated []Running, exited []Running, changed bool) {
	prev, next = normalize(prev), normalize(next)
	if len(next) > 0 {
		annotated = make([]Running, len(next))
	}
	i, j := 0, 0
	for i < len(prev) || j < len(next) {
		c := 0
		switch {
		case i == len(prev):
			c = 1
		case j == len(next):
			c = -1
		default:
			c = compareKey(prev[i].Name, prev[i].Fingerprint, next[j].Name, next[j].Fingerprint)
		}
		switch {
		case c < 0: // only in prev
			e := prev[i]
			e.Annotation = Annotation{Type: Exited, Was: e.Instances, Now: 0}
			exited = append(exited, e)
			changed = true
			i++
		case c > 0: // only in next
			a := next[j]
			a.Annotation = Annotation{Type: Started, Was: 0, Now: a.Instances}
			annotated[j] = a
			changed = true
			j++
		default:
			p, a := &prev[i], next[j]
			a.Annotation = Annotation{Type: Unchanged, Was: p.Instances, Now: a.Instances}
			if p.Instances != a.Instances ||
				(includeScaling && !slices.Equal(p.CreationTimestamps, a.CreationTimestamps)) {
				a.Annotation.Type = Changed
				changed = true
			}
			annotated[j] = a
			i++
			j++
		}
	}
	return annotated, exited, changed
}

// Event is one entry of an environment's log: an artifact started, changed or exited.
type Event struct {
	Type        string `json:"type"` // Started, Changed or Exited
	Name        string `json:"artifact_name"`
	Fingerprint string `json:"sha256"`
	Description string `json:"description"`
	Was         int    `json:"was"`
	Now         int    `json:"now"`
}

// Events returns one event per started, changed or exited artifact of a Diff, in (Name,
// Fingerprint) order, so a replaced digest's exited and started events sit side by side.
// Unchanged artifacts log nothing.
func Events(annotated, exited []Running) []Event {
	n := len(exited)
	for i := range annotated {
		if annotated[i].Annotation.Type != Unchanged {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]Event, 0, n)
	i, j := 0, 0
	for i < len(annotated) || j < len(exited) {
		var r *Running
		if j == len(exited) || (i < len(annotated) &&
			compareKey(annotated[i].Name, annotated[i].Fingerprint, exited[j].Name, exited[j].Fingerprint) <= 0) {
			r = &annotated[i]
			i++
		} else {
			r = &exited[j]
			j++
		}
		a := r.Annotation
		if a.Type == Unchanged || a.Type == "" {
			continue
		}
		out = append(out, Event{
			Type:        a.Type,
			Name:        r.Name,
			Fingerprint: r.Fingerprint,
			Description: Describe(a),
			Was:         a.Was,
			Now:         a.Now,
		})
	}
	return out
}

// Describe words an annotation as the hosted service does in its environment log:
//
//	3 instances started running (from 0 to 3)
//	1 instance stopped running (from 1 to 0)
//	3 instances changed
//
// A count change names the instances that came or went with the real bounds, "2 instances
// started running (from 1 to 3)": the hosted phrase carries "(from A to B)" for exactly that.
func Describe(a Annotation) string {
	switch {
	case a.Type == Unchanged:
		return ""
	case a.Now > a.Was:
		return count(a.Now-a.Was) + " started running (from " + strconv.Itoa(a.Was) + " to " + strconv.Itoa(a.Now) + ")"
	case a.Now < a.Was:
		return count(a.Was-a.Now) + " stopped running (from " + strconv.Itoa(a.Was) + " to " + strconv.Itoa(a.Now) + ")"
	default:
		return count(a.Now) + " changed"
	}
}

func count(n int) string {
	if n == 1 {
		return "1 instance"
	}
	return strconv.Itoa(n) + " instances"
}
