//go:build !unix

package evaluate

import "testing"

// reportCPU reports nothing where the system cannot tell a process's CPU time.
func reportCPU(*testing.B) {}
