//go:build unix

package evaluate

import (
	"syscall"
	"testing"
	"time"
)

// reportCPU reports the CPU time (user and system, every goroutine of the process) per op from
// now until the benchmark ends: on a shared machine the wall time per op mostly measures the
// other processes, the CPU time much less so.
func reportCPU(b *testing.B) {
	start, ok := processCPU()
	if !ok {
		return
	}
	b.Cleanup(func() {
		if end, ok := processCPU(); ok {
			b.ReportMetric(float64((end-start).Microseconds())/float64(b.N), "cpu-us/op")
		}
	})
}

func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
