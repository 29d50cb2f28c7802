package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// versionCommand prints what --version prints.
func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the module version, the VCS commit and the Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionText())
			return err
		},
	}
}

// versionText describes this binary from its build information.
func versionText() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "veritrail: no build information in this binary\n"
	}
	return describeBuild(bi)
}

// describeBuild is the module version, the commit (with "modified" when the work tree had
// changes) and the Go version. A binary built with -buildvcs=false, or outside a repository,
// has no commit.
func describeBuild(bi *debug.BuildInfo) string {
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	commit := "unknown (built without VCS information)"
	if rev := settings["vcs.revision"]; rev != "" {
		commit = rev
		if t := settings["vcs.time"]; t != "" {
			commit += " (" + t + ")"
		}
		if settings["vcs.modified"] == "true" {
			commit += ", modified"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "veritrail %s\n", bi.Main.Version)
	fmt.Fprintf(&b, "module:  %s\n", bi.Main.Path)
	fmt.Fprintf(&b, "commit:  %s\n", commit)
	fmt.Fprintf(&b, "go:      %s\n", bi.GoVersion)
	return b.String()
}
