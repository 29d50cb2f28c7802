package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/policytest"
)

func policyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "tools for policy authors: lint, compile, test and what-if environment policies",
		Long: `Tools for authors of environment policies; all but what-if work offline. A FILE ending in .rego is a raw Rego
policy (or its Rego unit tests); any other is a YAML policy.`,
		Args: noSubcommand,
		RunE: groupRun,
	}

	var controls string
	lint := &cobra.Command{
		Use:   "lint FILE...",
		Short: "check policies against the schema and their expressions",
		Long: `Check policies against the schema and their expressions; every problem as FILE:LINE:COL: field: message.
With --controls, for_control must name one of these controls.`,
		Args: filesArgs(1, -1),
		RunE: func(cmd *cobra.Command, files []string) error {
			return lintPolicies(files, knownControls(controls), cmd.OutOrStdout())
		},
	}
	lint.Flags().StringVar(&controls, "controls", "", "comma-separated control ids that for_control may name")

	compile := &cobra.Command{
		Use:   "compile FILE",
		Short: "print the Rego module the policy runs as",
		Args:  filesArgs(1, 1),
		RunE: func(cmd *cobra.Command, files []string) error {
			return compilePolicy(files[0], cmd.OutOrStdout())
		},
	}

	var runFilter string
	var verbose bool
	test := &cobra.Command{
		Use:   "test FILE...",
		Short: "run fixture files and the Rego unit tests of the .rego files given",
		Long: `Run fixture files (.yml, .yaml or .json: a policy, an environment, and artifacts with the decisions they
must get) and the Rego unit tests (test_ rules) of the .rego files given, which are compiled together.

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

func lintPolicies(files []string, controls func(string) bool, stdout io.Writer) error {
	bad, problems := 0, 0
	for _, f := range files {
		if policytest.IsRegoTest(f) {
			continue // tests are checked by "policy test"
		}
		_, err := policytest.LoadPolicy(f, controls)
		if err == nil {
			continue
		}
		bad++
		var ve *envpolicy.ValidationError
		if !errors.As(err, &ve) {
			fmt.Fprintf(stdout, "%s: %v\n", f, err)
			problems++
			continue
		}
		policytest.WriteProblems(stdout, f, err)
		problems += len(ve.Problems)
	}
	if bad > 0 {
		return fmt.Errorf("%d problem(s) in %d of %d file(s)", problems, bad, len(files))
	}
	return nil
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
