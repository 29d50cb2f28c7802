package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/cmd/veritrail/config"
)

// run runs the command line args (without the program name).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRoot()
	root.SetArgs(singleDashLongFlags(root, args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

// newRoot is the command tree. Errors are printed once, by main; usage only on -h.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "veritrail",
		Short: "Veritrail: supply-chain compliance evidence, its evaluation and notifications",
		Long: `Veritrail records supply-chain evidence (flows, trails, attestations, environment snapshots), decides
compliance and sends notifications.

Settings are read from defaults < the YAML file of --config (VERITRAIL_CONFIG) < VERITRAIL_* environment
variables < flags; every setting is listed in docs/CONFIGURATION.md and in 'veritrail CMD -h'.`,
		Version:       versionText(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          noSubcommand,
		RunE:          groupRun,
	}
	root.SetVersionTemplate("{{.Version}}")
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(
		tierCommand("serve", "run every tier in one process on a data directory (SQLite, embedded bus)", app.StartEmbedded),
		tierCommand("ingest", "run the HTTP ingest tier on Kafka and PostgreSQL", app.StartIngest),
		tierCommand("evaluate", "run the evaluate tier on Kafka and PostgreSQL", app.StartEvaluate),
		tierCommand("notify", "run the notify tier (deliver notifications) on Kafka and PostgreSQL", app.StartNotify),
		adminCommand(),
		policyCommand(),
		versionCommand(),
		configCommand(),
	)
	return root
}

// singleDashLongFlags rewrites -name and -name=value, which the standard flag package of the
// earlier command line accepted, as --name: scripts written for it keep working. Only names of
// long flags of the tree are rewritten, and nothing after "--".
func singleDashLongFlags(root *cobra.Command, args []string) []string {
	long := map[string]bool{}
	var collect func(*cobra.Command)
	collect = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		for _, sub := range c.Commands() {
			collect(sub)
		}
	}
	collect(root)
	out := make([]string, len(args))
	for i, a := range args {
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && long[name] {
			a = "-" + a
		}
		out[i] = a
	}
	return out
}

// noSubcommand lets a command that groups others take any arguments, so that groupRun words
// the error of an unknown one.
func noSubcommand(*cobra.Command, []string) error { return nil }

// groupRun is the action of a command that only groups others: without a subcommand (or with
// an unknown one) it prints its usage and fails, as the hand-made command line did; "help"
// prints the usage.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) == 1 && args[0] == "help" {
		return cmd.Help()
	}
	cmd.SetOut(cmd.ErrOrStderr())
	_ = cmd.Usage()
	what := "command"
	if cmd.HasParent() {
		what = cmd.Name() + " subcommand"
	}
	if len(args) == 0 {
		return fmt.Errorf("no %s given", what)
	}
	return fmt.Errorf("unknown %s %q", what, args[0])
}

// configCommand is hidden: `veritrail config docs` prints docs/CONFIGURATION.md (go generate).
func configCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "configuration tools", Hidden: true, Args: noSubcommand, RunE: groupRun}
	cmd.AddCommand(&cobra.Command{
		Use:   "docs",
		Short: "print docs/CONFIGURATION.md, generated from the settings",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return config.WriteMarkdown(cmd.OutOrStdout()) },
	})
	return cmd
}
