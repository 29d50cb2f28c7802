package bench

import (
	"fmt"

	"github.com/veritrail/veritrail/internal/gctune"
)

// productGC sets the garbage collector for the product's phases as the veritrail command sets
// it for its process (package gctune); the baselines before them run with Go's defaults, as a
// bare Huma service would. It answers how the product ran, for the report, and what undoes it.
func productGC() (desc string, restore func()) {
	applied, restore := gctune.Apply(gctune.OS())
	switch {
	case applied.Percent == 0:
		desc = "GOGC from the environment"
	default:
		desc = fmt.Sprintf("GOGC=%d (the veritrail command's default)", applied.Percent)
	}
	if applied.Limit > 0 {
		desc += fmt.Sprintf(", memory limit %d MiB from the container", applied.Limit>>20)
	}
	return desc + "; baselines at Go's defaults", restore
}
