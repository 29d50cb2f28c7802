package bench

import "github.com/veritrail/veritrail/internal/gctune"

// productGC sets the garbage collector for the product's phases as the veritrail command sets
// it for its process (package gctune); the baselines before them run with Go's defaults, as a
// bare Huma service would. It answers how the product ran, for the report, and what undoes it.
func productGC() (desc string, restore func()) {
	applied, restore := gctune.Apply(gctune.OS())
	return applied.String() + "; baselines at Go's defaults", restore
}
