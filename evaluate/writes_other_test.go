//go:build !linux

package evaluate

import "testing"

// reportWrites reports nothing where /proc/self/io does not exist.
func reportWrites(*testing.B) {}
