// Package procmem reads this process's resident set from /proc, for the benchmark's memory
// figures (issue 21 item 6): VmRSS now and VmHWM, its peak, which ClearPeak resets so that a
// phase's peak is not an earlier phase's.
package procmem

import (
	"fmt"
	"os"
	"strings"
)

// Usage is a reading, in MB (0 where /proc has none: not Linux).
type Usage struct {
	RSSMB float64 `json:"rss_mb"`
	HWMMB float64 `json:"hwm_mb"`
}

// ClearPeak resets VmHWM to the current resident set (Linux 4.0 and later); where the kernel
// does not allow it, the next reading's peak includes what came before.
func ClearPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// Read reads VmRSS and VmHWM.
func Read() Usage {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return Usage{}
	}
	return parse(string(b))
}

func parse(status string) Usage {
	var u Usage
	for _, line := range strings.Split(status, "\n") {
		var kb float64
		if _, err := fmt.Sscanf(line, "VmRSS: %f kB", &kb); err == nil {
			u.RSSMB = kb / 1024
		}
		if _, err := fmt.Sscanf(line, "VmHWM: %f kB", &kb); err == nil {
			u.HWMMB = kb / 1024
		}
	}
	return u
}
