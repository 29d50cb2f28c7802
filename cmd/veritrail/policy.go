package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/policytest"
	"github.com/veritrail/veritrail/policies/template"
)

func policyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "tools for authors of environment policies and flow templates: lint, compile, test and what-if",
		Long: `Tools for authors of environment policies and flow templates; all but what-if work offline. A FILE ending in
.rego is a raw Rego policy (or its Rego unit tests); a YAML file with version or trail at the top (and no
_schema) is a flow template; any other is a YAML policy. --kind policy|template says it outright.`,
		Args: noSubcommand,
		RunE: groupRun,
	}

	var controls, kind string
	var lo lintOptions
	lint := &cobra.Command{
		Use:   "lint FILE...",
		Short: "check policies and flow templates against their schema and rules",
		Long: `Check policies and flow templates against their schema and rules. Each problem is printed as
FILE:LINE:COL: field: message, sorted by line and column; a file without any as "ok FILE" (-q: nothing).
--format json prints one array of {file, line, column, severity, message, rule} instead, where rule is the
field that breaks a rule, or policy_file / template_file for the whole file. With --controls, for_control must
name one of these controls. Fails when a file has a problem.`,
		Args: filesArgs(1, -1),
		RunE: func(cmd *cobra.Command, files []string) error {
			k, err := policytest.ParseKind(kind)
			if err != nil {
				return fmt.Errorf("--kind: %w", err)
			}
			lo.controls, lo.kind = knownControls(controls), k
			return lintFiles(files, lo, cmd.OutOrStdout())
		},
	}
	lint.Flags().StringVar(&controls, "controls", "", "comma-separated control ids that for_control may name")
	lint.Flags().BoolVarP(&lo.quiet, "quiet", "q", false, "print nothing for files without problems")
	lint.Flags().StringVar(&lo.format, "format", "text", "text, or json for editors and CI annotations")
	kindFlag(lint, &kind)

	var compileKind string
	compile := &cobra.Command{
		Use:   "compile FILE",
		Short: "print the Rego module the policy or flow template runs as",
		Args:  filesArgs(1, 1),
		RunE: func(cmd *cobra.Command, files []string) error {
			k, err := policytest.ParseKind(compileKind)
			if err != nil {
				return fmt.Errorf("--kind: %w", err)
			}
			return compileFile(files[0], k, cmd.OutOrStdout())
		},
	}
	kindFlag(compile, &compileKind)

	var runFilter string
	var verbose bool
	test := &cobra.Command{
		Use:   "test FILE...",
		Short: "run fixture files of policies and flow templates, and the Rego unit tests of the .rego files given",
		Long: `Run fixture files (.yml, .yaml or .json: a policy, an environment, and artifacts with the decisions they
must get; or a flow template and trails of evidence with the compliance they must get) and the Rego unit tests
(test_ rules) of the .rego files given, which are compiled together.

` + policytest.FixtureFormat,
		Args: filesArgs(1, -1),
		RunE: func(cmd *cobra.Command, files []string) error {
			filter, err := regexp.Compile(runFilter)
			if err != nil {
				return fmt.Errorf("--run: %w", err)
			}
			return policytest.Run(cmd.Context(), files, policytest.Options{Filter: filter, Verbose: verbose}, cmd.OutOrStdout())
		},
	}
	test.Flags().StringVar(&runFilter, "run", "", "run only the cases and Rego tests whose names match this regular expression")
	test.Flags().BoolVarP(&verbose, "verbose", "v", false, "list passing cases and tests too")

	cmd.AddCommand(lint, compile, test, whatIfCommand())
	return cmd
}

// filesArgs accepts min to max (-1: any number) file arguments, else fails with the usage line.
func filesArgs(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return fmt.Errorf("usage: %s", cmd.UseLine())
		}
		return nil
	}
}

// knownControls is the ParseOptions check of --controls; nil (no check) when the flag is empty.
func knownControls(list string) func(string) bool {
	if list == "" {
		return nil
	}
	ids := strings.Split(list, ",")
	return func(id string) bool { return slices.Contains(ids, id) }
}

// kindFlag adds --kind: what the files are when their shape is not to be trusted.
func kindFlag(cmd *cobra.Command, kind *string) {
	cmd.Flags().StringVar(kind, "kind", "", "policy or template (default: recognised by the file's shape: a template has version and trail)")
}

// compileFile prints the Rego module a policy or a flow template (kind, or recognised by its shape) runs as.
func compileFile(file string, kind policytest.Kind, stdout io.Writer) error {
	if kind == "" {
		content, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		kind = policytest.KindOf(file, content)
	}
	if kind == policytest.KindTemplate {
		return compileTemplate(file, stdout)
	}
	return compilePolicy(file, stdout)
}

func compileTemplate(file string, stdout io.Writer) error {
	t, err := policytest.LoadTemplate(file)
	if err != nil {
		if policytest.WriteProblems(stdout, file, err) {
			return fmt.Errorf("%s is not a valid flow template", file)
		}
		return err
	}
	mod, err := template.Compile(t)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	_, err = io.WriteString(stdout, mod)
	return err
}

func compilePolicy(file string, stdout io.Writer) error {
	p, err := policytest.LoadPolicy(file, nil)
	if err != nil {
		if policytest.WriteProblems(stdout, file, err) {
			return fmt.Errorf("%s is not a valid policy", file)
		}
		return err
	}
	mod, err := envpolicy.Compile(p)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	_, err = io.WriteString(stdout, mod)
	return err
}
