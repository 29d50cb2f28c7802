package snapshot

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
)

// DiffResult is the env-diff response (GET /env-diff/{org}?snappish1=..&snappish2=..):
//
//	{"snappish1": {"snapshot_id", "artifacts"}, "snappish2": {...},
//	 "changed": {"artifacts"}, "not-changed": {"artifacts"}}
//
// Every list marshals as an array, never null, and is sorted by fingerprint as served.
type DiffResult struct {
	Snappish1  DiffSide  `json:"snappish1"`   // only in the first snapshot
	Snappish2  DiffSide  `json:"snappish2"`   // only in the second
	Changed    DiffGroup `json:"changed"`     // in both, with different instance counts
	NotChanged DiffGroup `json:"not-changed"` // in both, with the same instance count
}

// DiffSide is the artifacts only one snapshot runs, with that snapshot's id ("aws-beta#8099").
type DiffSide struct {
	SnapshotID string         `json:"snapshot_id"`
	Artifacts  []DiffArtifact `json:"artifacts"`
}

// DiffGroup is a list of artifacts both snapshots run.
type DiffGroup struct {
	Artifacts []DiffArtifact `json:"artifacts"`
}

// DiffArtifact is one artifact of an env-diff. InstanceCount is set for the one-sided and the
// not-changed lists; S1InstanceCount and S2InstanceCount instead for changed ones, as the
// hosted CLI reads them ("scaled from S1 to S2"). Running artifacts have at least one instance,
// so a zero count means absent and is left out.
type DiffArtifact struct {
	Fingerprint         string   `json:"fingerprint"`
	Name                string   `json:"name"`
	MostRecentTimestamp int64    `json:"most_recent_timestamp"` // latest creation timestamp, whole seconds; 0 if unknown
	Flow                Optional `json:"flow" nullable:"true"`
	CommitURL           Optional `json:"commit_url" nullable:"true"`
	InstanceCount       int      `json:"instance_count,omitempty"`
	S1InstanceCount     int      `json:"s1_instance_count,omitempty"`
	S2InstanceCount     int      `json:"s2_instance_count,omitempty"`
}

// Optional is a string that marshals as null when empty: what an artifact without known
// provenance shows for its flow and commit.
type Optional string

// MarshalJSON writes null for the empty string.
func (o Optional) MarshalJSON() ([]byte, error) {
	if o == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(o))
}

// UnmarshalJSON reads null as the empty string.
func (o *Optional) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*o = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*o = Optional(s)
	return nil
}

// CompareOptions supplies what an env-diff shows beyond the running sets.
type CompareOptions struct {
	// Snapshot1 and Snapshot2 are the compared snapshots' ids as served, see SnapshotID.
	Snapshot1, Snapshot2 string
	// Provenance names the flow and commit URL an artifact was built in ("" when unknown).
	// Nil leaves every artifact without provenance.
	Provenance func(name, fingerprint string) (flow, commitURL string)
}

// SnapshotID is the id env-diff shows for a snapshot: "aws-prod#5253".
func SnapshotID(env string, index int) string {
	return env + "#" + strconv.Itoa(index)
}

// Compare builds the env-diff of two running sets (as Group, Union or Diff return them). An
// artifact is the same in both when its (Name, Fingerprint) is, as everywhere in this package:
// the same name with another fingerprint is one artifact only in a and another only in b.
// Artifacts in both are "changed" when their instance counts differ (what the hosted CLI
// prints as scaling) and "not-changed" otherwise.
func Compare(a, b []Running, opts CompareOptions) DiffResult {
	a, b = normalize(a), normalize(b)
	res := DiffResult{
		Snappish1:  DiffSide{SnapshotID: opts.Snapshot1, Artifacts: []DiffArtifact{}},
		Snappish2:  DiffSide{SnapshotID: opts.Snapshot2, Artifacts: []DiffArtifact{}},
		Changed:    DiffGroup{Artifacts: []DiffArtifact{}},
		NotChanged: DiffGroup{Artifacts: []DiffArtifact{}},
	}
	entry := func(r *Running) DiffArtifact {
		d := DiffArtifact{Fingerprint: r.Fingerprint, Name: r.Name, MostRecentTimestamp: mostRecent(r)}
		if opts.Provenance != nil {
			flow, url := opts.Provenance(r.Name, r.Fingerprint)
			d.Flow, d.CommitURL = Optional(flow), Optional(url)
		}
		return d
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		c := 0
		switch {
		case i == len(a):
			c = 1
		case j == len(b):
			c = -1
		default:
			c = compareKey(a[i].Name, a[i].Fingerprint, b[j].Name, b[j].Fingerprint)
		}
		switch {
		case c < 0:
			d := entry(&a[i])
			d.InstanceCount = a[i].Instances
			res.Snappish1.Artifacts = append(res.Snappish1.Artifacts, d)
			i++
		case c > 0:
			d := entry(&b[j])
			d.InstanceCount = b[j].Instances
			res.Snappish2.Artifacts = append(res.Snappish2.Artifacts, d)
			j++
		default:
			d := entry(&b[j]) // the second snapshot's state: its latest start
			if a[i].Instances != b[j].Instances {
				d.S1InstanceCount, d.S2InstanceCount = a[i].Instances, b[j].Instances
				res.Changed.Artifacts = append(res.Changed.Artifacts, d)
			} else {
				d.InstanceCount = b[j].Instances
				res.NotChanged.Artifacts = append(res.NotChanged.Artifacts, d)
			}
			i++
			j++
		}
	}
	for _, l := range [][]DiffArtifact{res.Snappish1.Artifacts, res.Snappish2.Artifacts, res.Changed.Artifacts, res.NotChanged.Artifacts} {
		slices.SortFunc(l, func(x, y DiffArtifact) int {
			if c := strings.Compare(x.Fingerprint, y.Fingerprint); c != 0 {
				return c
			}
			return strings.Compare(x.Name, y.Name)
		})
	}
	return res
}

// mostRecent is the latest creation timestamp in whole seconds, as env-diff serves it.
func mostRecent(r *Running) int64 {
	if len(r.CreationTimestamps) == 0 {
		return 0
	}
	// The last is the latest (sorted ascending). Unknown (0), NaN or out of range shows 0.
	t := r.CreationTimestamps[len(r.CreationTimestamps)-1]
	if !(t > 0) || math.IsInf(t, 1) {
		return 0
	}
	return int64(t)
}
