package faults

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Report is what a run found. Problems is empty when every check passed.
type Report struct {
	Mode     string   `json:"mode"`
	Passed   bool     `json:"passed"`
	Problems []string `json:"problems"`

	Seed       uint64  `json:"seed"`
	Writers    int     `json:"writers"`
	Keys       int     `json:"keys"`                            // API keys the writers use
	Ahead      int     `json:"ahead"`                           // trails each writer begins before it attests them
	RateLimit  float64 `json:"rate_limit_per_second,omitempty"` // requests a second over all writers; 0 = none
	Partitions int32   `json:"kafka_partitions,omitempty"`
	Evaluators int     `json:"evaluators,omitempty"`
	// Times in the report (faults, samples, exits) are seconds since the run began: the load
	// began LoadBeganAtSeconds after, once the processes were up, and lasted LoadSeconds.
	LoadBeganAtSeconds float64 `json:"load_began_at_seconds"`
	LoadSeconds        float64 `json:"load_seconds"`
	// Drained: every attestation answered 201 stored, no trail waiting for evaluation, and
	// nothing applied between two looks; DrainSeconds is how long that took after the load.
	Drained      bool    `json:"drained"`
	DrainSeconds float64 `json:"drain_seconds"`

	Trails       Outcomes `json:"trail_requests"`
	Attestations Outcomes `json:"attestation_requests"`
	// MissingRetryAfter counts 503 and 429 answers without a Retry-After header.
	MissingRetryAfter int        `json:"missing_retry_after"`
	Stored            Stored     `json:"stored"`
	Snapshots         Snapshots  `json:"snapshots"`
	Throughput        Throughput `json:"throughput"`
	Backlog           Backlog    `json:"backlog"`
	Faults            []Fault    `json:"faults"`
	Deadlocks         Deadlocks  `json:"deadlocks"`
	// ReadYourWritesTimeouts are the ingest tier's logged read-after-write waits that timed out
	// (consistency.TimedOut).
	ReadYourWritesTimeouts int       `json:"read_your_writes_timeouts"`
	Processes              []Process `json:"processes"`
	UnexpectedExits        []Exit    `json:"unexpected_exits"`
	// Examples are the first few answers of each kind other than 201 and 200.
	Examples []string `json:"examples"`
	LogDir   string   `json:"log_dir"`
}

// Outcomes counts requests by how they ended.
type Outcomes struct {
	Sent    int `json:"sent"`
	Created int `json:"201"`
	Updated int `json:"200"`
	Refused int `json:"4xx"`
	Limited int `json:"429"`
	Failed  int `json:"5xx"`
	Broken  int `json:"connection_errors"`
	NotSent int `json:"not_sent"` // the connection was refused: nothing was sent
}

// Stored is what verification found in the store.
type Stored struct {
	Attestations           int `json:"attestations"`
	AcknowledgedStoredOnce int `json:"acknowledged_stored_once"`
	Lost                   int `json:"lost"`
	Duplicated             int `json:"duplicated"`
	AmbiguousStored        int `json:"ambiguous_stored"`
	AmbiguousNotStored     int `json:"ambiguous_not_stored"`
	StoredButRefused       int `json:"stored_but_refused"`
	StoredNeverSent        int `json:"stored_never_sent"`
	Trails                 int `json:"trails"`
	TrailsChecked          int `json:"trails_checked"`
	ComplianceMismatches   int `json:"compliance_mismatches"`
}

// Snapshots is what the environment snapshots exercised beside the load sent, and what the
// checks of the final snapshots found (snapshots.go).
type Snapshots struct {
	Environments int `json:"environments"`
	Artifacts    int `json:"artifacts"` // each reported in a trail of its own
	// Reports are the running sets reported during the load, Evidence the build attestations
	// that flip the artifacts' trails meanwhile, FinalReports the reports after the drain.
	Reports      Outcomes `json:"report_requests"`
	Evidence     Outcomes `json:"evidence_requests"`
	FinalReports Outcomes `json:"final_report_requests"`
	// EnvironmentsChecked have a final snapshot; ArtifactsChecked are their artifacts, checked
	// against their trails through the API: Compliant of them are right and compliant (so both
	// states were checked when it is neither 0 nor all), Wrong show another compliance or
	// provenance (or were never reported); Missing were reported but are not in their final
	// snapshot.
	EnvironmentsChecked int `json:"environments_checked"`
	ArtifactsChecked    int `json:"artifacts_checked"`
	Compliant           int `json:"compliant"`
	Wrong               int `json:"wrong"`
	Missing             int `json:"missing"`
}

// Throughput of the run.
type Throughput struct {
	CreatedPerSecond float64 `json:"created_per_second"` // attestations answered 201 a second of load
	// AppliedPerSecondInLoad is attestations stored by the end of the load over its duration;
	// AppliedPerSecond all stored over the load and the drain.
	AppliedPerSecondInLoad float64 `json:"applied_per_second_in_load"`
	AppliedPerSecond       float64 `json:"applied_per_second"`
}

// Backlog is how far the store was behind the 201s.
type Backlog struct {
	Max          int      `json:"max"`
	MaxAtSeconds float64  `json:"max_at_seconds"`
	AtLoadEnd    int      `json:"at_load_end"`
	Samples      []Sample `json:"samples"`
}

// Sample is one look at the store, T seconds after the run began.
type Sample struct {
	T            float64 `json:"t"`
	Acknowledged int     `json:"acknowledged"` // attestations answered 201 so far
	Stored       int     `json:"stored"`
	Backlog      int     `json:"backlog"` // acknowledged - stored, at least 0
	DirtyTrails  int     `json:"dirty_trails"`
}

// Fault is one fault of the schedule.
type Fault struct {
	AtSeconds float64 `json:"at_seconds"`
	Fault     string  `json:"fault"`
	Detail    string  `json:"detail"`
	// Recovered: the writes got their step of 201s after the fault, in RecoveredSeconds.
	Recovered        bool    `json:"recovered"`
	RecoveredSeconds float64 `json:"recovered_seconds"`
}

// Deadlocks seen during the run.
type Deadlocks struct {
	// PGStatDatabase is the database's pg_stat_database.deadlocks delta: every user of the
	// database counts, not only this run.
	PGStatDatabase int64 `json:"pg_stat_database"`
	// InLogs counts the "deadlock detected" errors the run's processes logged.
	InLogs int    `json:"in_logs"`
	First  string `json:"first,omitempty"`
}

// Process is one process of the cluster, over its restarts.
type Process struct {
	Name        string `json:"name"`
	Starts      int    `json:"starts"`
	ErrorLines  int    `json:"error_lines"`
	Deadlocks   int    `json:"deadlocks"`
	RYWTimeouts int    `json:"read_your_writes_timeouts"`
	Log         string `json:"log"`
}

// Exit is a process that exited without being killed.
type Exit struct {
	Process   string  `json:"process"`
	Start     int     `json:"start"`
	AtSeconds float64 `json:"at_seconds"`
	Status    string  `json:"status"`
	LastError string  `json:"last_error"` // the last line its log has at level ERROR
	LogTail   string  `json:"log_tail"`
}

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	verdict := "PASSED"
	if !r.Passed {
		verdict = fmt.Sprintf("FAILED (%d problems)", len(r.Problems))
	}
	fmt.Fprintf(&b, "faults, %s mode: %s\n", r.Mode, verdict)
	fmt.Fprintf(&b, "  load: %.1f s from +%.1f s, %d writers on %d keys, %d trails ahead, seed %d",
		r.LoadSeconds, r.LoadBeganAtSeconds, r.Writers, r.Keys, r.Ahead, r.Seed)
	if r.RateLimit > 0 {
		fmt.Fprintf(&b, ", at most %.0f requests/s", r.RateLimit)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  attestations: %s\n", r.Attestations)
	fmt.Fprintf(&b, "  trails begun: %s\n", r.Trails)
	fmt.Fprintf(&b, "  stored: %d attestations in %d trails; 201s stored once %d, lost %d, duplicated %d; ambiguous stored %d, not stored %d; refused but stored %d; never sent but stored %d\n",
		r.Stored.Attestations, r.Stored.Trails, r.Stored.AcknowledgedStoredOnce, r.Stored.Lost, r.Stored.Duplicated,
		r.Stored.AmbiguousStored, r.Stored.AmbiguousNotStored, r.Stored.StoredButRefused, r.Stored.StoredNeverSent)
	fmt.Fprintf(&b, "  compliance: %d trails checked through the API, %d wrong\n", r.Stored.TrailsChecked, r.Stored.ComplianceMismatches)
	fmt.Fprintf(&b, "  snapshot reports: %s\n", r.Snapshots.Reports)
	fmt.Fprintf(&b, "  snapshot evidence (build attestations): %s\n", r.Snapshots.Evidence)
	fmt.Fprintf(&b, "  final snapshot reports: %s\n", r.Snapshots.FinalReports)
	fmt.Fprintf(&b, "  snapshots: %d of %d environments checked, %d artifacts checked against their trails through the API (%d compliant), %d wrong, %d missing\n",
		r.Snapshots.EnvironmentsChecked, r.Snapshots.Environments, r.Snapshots.ArtifactsChecked, r.Snapshots.Compliant,
		r.Snapshots.Wrong, r.Snapshots.Missing)
	fmt.Fprintf(&b, "  throughput: %.0f 201s/s; applied %.0f/s during the load, %.0f/s with the drain\n",
		r.Throughput.CreatedPerSecond, r.Throughput.AppliedPerSecondInLoad, r.Throughput.AppliedPerSecond)
	if r.Drained {
		fmt.Fprintf(&b, "  drained %.1f s after the load\n", r.DrainSeconds)
	} else {
		fmt.Fprintf(&b, "  NOT drained %.1f s after the load\n", r.DrainSeconds)
	}
	fmt.Fprintf(&b, "  backlog (acknowledged - stored): max %d at %.0f s, %d at the load's end; over time: %s\n",
		r.Backlog.Max, r.Backlog.MaxAtSeconds, r.Backlog.AtLoadEnd, sparse(r.Backlog.Samples, 16))
	fmt.Fprintf(&b, "  deadlocks: %d logged by the processes, %d in pg_stat_database (whole database)\n",
		r.Deadlocks.InLogs, r.Deadlocks.PGStatDatabase)
	fmt.Fprintf(&b, "  read-your-writes timeouts logged: %d; 503/429 without Retry-After: %d\n", r.ReadYourWritesTimeouts, r.MissingRetryAfter)
	b.WriteString("  faults:\n")
	for _, f := range r.Faults {
		rec := fmt.Sprintf("writes recovered in %.1f s", f.RecoveredSeconds)
		if !f.Recovered {
			rec = fmt.Sprintf("writes NOT recovered after %.1f s", f.RecoveredSeconds)
		}
		fmt.Fprintf(&b, "    +%5.1f s %s: %s; %s\n", f.AtSeconds, f.Fault, f.Detail, rec)
	}
	b.WriteString("  processes:\n")
	for _, p := range r.Processes {
		fmt.Fprintf(&b, "    %-11s started %d times, %d ERROR lines, %d deadlocks, %d read-your-writes timeouts (%s)\n",
			p.Name, p.Starts, p.ErrorLines, p.Deadlocks, p.RYWTimeouts, p.Log)
	}
	for _, e := range r.UnexpectedExits {
		fmt.Fprintf(&b, "  %s (start %d) exited on its own at %.1f s: %s\n    %s\n", e.Process, e.Start, e.AtSeconds, e.Status, e.LastError)
	}
	if len(r.Problems) > 0 {
		b.WriteString("problems:\n")
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "  - %s\n", p)
		}
	}
	if len(r.Examples) > 0 {
		b.WriteString("answers other than 2xx (first of each kind):\n")
		for _, e := range r.Examples {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (o Outcomes) String() string {
	return fmt.Sprintf("%d sent: %d 201, %d 200, %d 4xx, %d 429, %d 5xx, %d connection errors, %d not sent",
		o.Sent, o.Created, o.Updated, o.Refused, o.Limited, o.Failed, o.Broken, o.NotSent)
}

// sparse shows at most n samples as "t:backlog".
func sparse(s []Sample, n int) string {
	if len(s) == 0 {
		return "(no samples)"
	}
	step := int(math.Ceil(float64(len(s)) / float64(n)))
	var parts []string
	for i := 0; i < len(s); i += step {
		parts = append(parts, fmt.Sprintf("%.1fs:%d", s[i].T, s[i].Backlog))
	}
	if last := s[len(s)-1]; (len(s)-1)%step != 0 {
		parts = append(parts, fmt.Sprintf("%.1fs:%d", last.T, last.Backlog))
	}
	return strings.Join(parts, " ")
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }
