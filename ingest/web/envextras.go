package web

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/veritrail/veritrail/internal/snapshot"
	"github.com/veritrail/veritrail/internal/store"
)

// chartSnapshots is how many of an environment's latest snapshots its compliance chart shows.
const chartSnapshots = 60

// chart is an environment's compliance over its latest snapshots, drawn server-side as SVG:
// one bar per snapshot, oldest left. The state is in each bar's height as well as its colour
// (compliant full, non-compliant a third, undecided a tenth), in its title, and in Summary.
type chart struct {
	Width, Height int
	Bars          []chartBar
	Summary       string
}

type chartBar struct {
	X, Y, W, H int
	Class      string
	Label      string
}

func newChart(snaps []store.Snapshot) chart {
	const width, height = 600, 80
	c := chart{Width: width, Height: height}
	if len(snaps) == 0 {
		return c
	}
	w := width / len(snaps)
	compliant, failing := 0, 0
	for i := range snaps {
		s := snaps[len(snaps)-1-i] // the store lists newest first
		h, class, word := height/10, "pending", "no policy decides"
		switch {
		case s.Compliant == nil:
		case *s.Compliant:
			h, class, word = height, "ok", "compliant"
			compliant++
		default:
			h, class, word = height/3, "bad", "non-compliant"
			failing++
		}
		c.Bars = append(c.Bars, chartBar{X: i * w, Y: height - h, W: max(w-1, 1), H: h, Class: class,
			Label: fmt.Sprintf("#%d %s: %s", s.Index, formatTime(s.Timestamp), word)})
	}
	c.Summary = fmt.Sprintf("Of the last %d snapshots, %d compliant, %d non-compliant, %d undecided.",
		len(snaps), compliant, failing, len(snaps)-compliant-failing)
	return c
}

// envEvent is an entry of an environment's event log as the page shows it.
type envEvent struct {
	store.EnvEvent
	FlowName string
}

// environmentExtras adds the compliance chart and a page of the event log to d.
func (s *Site) environmentExtras(c *call, d *environmentData) error {
	ctx := c.ctx()
	if d.Snapshot != nil {
		snaps, err := s.store.ListSnapshots(ctx, d.Env.ID, max(1, d.Snapshot.Index-chartSnapshots+1), d.Snapshot.Index)
		if err != nil {
			return fmt.Errorf("list snapshots: %w", err)
		}
		d.Chart = newChart(snaps)
	}
	page := c.pageParam("events")
	events, total, err := s.store.EnvEvents(ctx, d.Env.ID, store.EventFilter{Page: store.Page{Page: page, PerPage: perPage}})
	if err != nil {
		return fmt.Errorf("list environment events: %w", err)
	}
	d.Events = make([]envEvent, 0, len(events))
	for _, e := range events {
		var doc struct {
			Flows []struct {
				FlowName string `json:"flow_name"`
			} `json:"flows"`
		}
		_ = json.Unmarshal(e.Doc, &doc) // written by the evaluator; an event without flows shows none
		ev := envEvent{EnvEvent: e}
		if len(doc.Flows) > 0 {
			ev.FlowName = doc.Flows[0].FlowName
		}
		d.Events = append(d.Events, ev)
	}
	d.EventPaging = c.paging("events", perPage, total)
	return nil
}

type diffData struct {
	Env      store.Environment
	From, To int
	Latest   int
	Result   snapshot.DiffResult
}

// diffPage compares two snapshots of an environment (by default the latest with the one
// before), as env-diff does.
func (s *Site) diffPage(c *call) (string, string, any, error) {
	ctx := c.ctx()
	e, err := s.store.EnvironmentByName(ctx, c.p.Org.ID, param(c.r, "env"))
	if err != nil {
		return "", "", nil, notFound("look up environment", err)
	}
	d := diffData{Env: e}
	latest, err := s.store.LatestSnapshot(ctx, e.ID)
	if err != nil {
		return "", "", nil, notFound("load latest snapshot", err)
	}
	d.Latest = latest.Index
	d.To = indexParam(c, "to", latest.Index)
	d.From = indexParam(c, "from", max(1, d.To-1))
	if d.From > latest.Index || d.To > latest.Index {
		return "", "", nil, errNotFound
	}
	from, fromProv, err := s.runningSet(c, e, d.From)
	if err != nil {
		return "", "", nil, err
	}
	to, toProv, err := s.runningSet(c, e, d.To)
	if err != nil {
		return "", "", nil, err
	}
	d.Result = snapshot.Compare(from, to, snapshot.CompareOptions{
		Snapshot1: snapshot.SnapshotID(e.Name, d.From), Snapshot2: snapshot.SnapshotID(e.Name, d.To),
		Provenance: func(name, fp string) (string, string) {
			if v, ok := toProv[[2]string{name, fp}]; ok {
				return v, ""
			}
			return fromProv[[2]string{name, fp}], ""
		}})
	return "diff", e.Name, d, nil
}

// indexParam is a snapshot index from the query, or def when absent or not a positive number.
func indexParam(c *call, name string, def int) int {
	n, err := strconv.Atoi(c.r.URL.Query().Get(name))
	if err != nil || n < 1 {
		return def
	}
	return n
}

// runningSet reads a snapshot as the running set env-diff compares, with the flow of each
// artifact.
func (s *Site) runningSet(c *call, e store.Environment, index int) ([]snapshot.Running, map[[2]string]string, error) {
	snap, err := s.store.SnapshotByIndex(c.ctx(), e.ID, index)
	if err != nil {
		return nil, nil, notFound("load snapshot", err)
	}
	var arts []struct {
		Name              string    `json:"name"`
		Fingerprint       string    `json:"fingerprint"`
		Instances         int       `json:"instances"`
		CreationTimestamp []float64 `json:"creationTimestamp"`
		FlowName          string    `json:"flow_name"`
	}
	if err := json.Unmarshal(snap.Artifacts, &arts); err != nil {
		return nil, nil, fmt.Errorf("decode snapshot: %w", err)
	}
	set := make([]snapshot.Running, len(arts))
	flows := make(map[[2]string]string, len(arts))
	for i, a := range arts {
		set[i] = snapshot.Running{Name: a.Name, Fingerprint: a.Fingerprint, Instances: a.Instances, CreationTimestamps: a.CreationTimestamp}
		flows[[2]string{a.Name, a.Fingerprint}] = a.FlowName
	}
	return set, flows, nil
}
