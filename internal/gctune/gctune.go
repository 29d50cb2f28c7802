// Package gctune sets the Go garbage collector of a Veritrail process: it trades memory for CPU,
// which the pipeline is short of (a 201 costs about 400 us of CPU across ingest and the
// evaluator, and at Go's default GOGC=100 about a tenth of it was collection), within a memory
// limit taken from the container when there is one.
//
// The operator's GOGC and GOMEMLIMIT win: each setting is only made when its variable is unset.
package gctune

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultPercent is the GC percent a process runs with unless GOGC says otherwise: the heap may
// grow to four times what is live before a collection. docs/PERFORMANCE.md has the measurements
// (100, 200, 300 and 400, alternating): 300 cost the least CPU per 201.
const DefaultPercent = 300

// LimitShare is the part of a container's memory limit that the Go runtime may use before it
// collects regardless of the percent; the rest is left to SQLite's page cache, which is not Go
// memory, and to the kernel.
const LimitShare = 0.8

// cgroupLimits are where Linux shows the memory limit of the process's container: cgroup v2,
// then v1. v1 reports "no limit" as a huge number, which is treated as none.
var cgroupLimits = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// Env is what Apply reads of the process: its environment and the files that show its
// container's memory limit. Tests pass their own.
type Env struct {
	Getenv   func(string) string
	ReadFile func(string) ([]byte, error)
}

// OS is the process's own environment.
func OS() Env { return Env{Getenv: os.Getenv, ReadFile: os.ReadFile} }

// Applied says what Apply set: Percent is 0 and Limit is 0 for what it left alone.
type Applied struct {
	Percent int
	Limit   int64
}

// String says how the process's collector runs, for reports: what Apply set, or that the
// environment chose.
func (a Applied) String() string {
	s := "GOGC from the environment"
	if a.Percent != 0 {
		s = "GOGC=" + strconv.Itoa(a.Percent)
	}
	if a.Limit > 0 {
		s += ", memory limit " + strconv.FormatInt(a.Limit>>20, 10) + " MiB from the container"
	}
	return s
}

// Apply sets the GC percent and the memory limit as the package describes and returns what it
// set and a function that puts back what was there before (the bench runs the product and its
// baselines in one process, and the baselines run with Go's defaults).
func Apply(env Env) (Applied, func()) {
	var a Applied
	prevPercent := -2 // none changed
	prevLimit := int64(-1)
	if env.Getenv("GOGC") == "" {
		a.Percent = DefaultPercent
		prevPercent = debug.SetGCPercent(DefaultPercent)
	}
	if env.Getenv("GOMEMLIMIT") == "" {
		if limit, ok := containerLimit(env.ReadFile); ok {
			a.Limit = int64(float64(limit) * LimitShare)
			prevLimit = debug.SetMemoryLimit(a.Limit)
		}
	}
	return a, func() {
		if prevPercent != -2 {
			debug.SetGCPercent(prevPercent)
		}
		if prevLimit >= 0 {
			debug.SetMemoryLimit(prevLimit)
		}
	}
}

// containerLimit is the memory limit of the process's cgroup, if it has one.
func containerLimit(readFile func(string) ([]byte, error)) (int64, bool) {
	for _, path := range cgroupLimits {
		raw, err := readFile(path)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(raw))
		if s == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// cgroup v1 writes its "unlimited" as the largest page-aligned int64.
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}
