package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/policytest"
)

const policyUsage = `Usage: veritrail policy <subcommand> [flags] FILE...

Tools for authors of environment policies; all but what-if work offline. A FILE ending in .rego is a raw Rego
policy (or its Rego unit tests); any other is a YAML policy.

Subcommands:
  lint [--controls ID,...] FILE...
        check policies against the schema and their expressions; every problem as FILE:LINE:COL: field: message.
        With --controls, for_control must name one of these controls.
  compile FILE
        print the Rego module the policy runs as
  test [--run REGEXP] [-v] FILE...
        run fixture files (.yml, .yaml or .json: a policy, an environment, and artifacts with the decisions they
        must get) and the Rego unit tests (test_ rules) of the .rego files given, which are compiled together.
  what-if --environment ENV [--host URL] [--api-token KEY] [--org ORG] [--name NAME] [--json] FILE
        ask the server how the draft policy FILE would judge the latest snapshot of ENV, without attaching or
        storing it: every artifact that would fail, and why. Fails when one would. --host, --api-token and --org
        default to VERITRAIL_HOST, VERITRAIL_API_TOKEN and VERITRAIL_ORG, then to KOSLI_HOST, KOSLI_API_TOKEN and
        KOSLI_ORG; --host to http://127.0.0.1:8080.

` + policytest.FixtureFormat

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, policyUsage)
		return errors.New("no policy subcommand given")
	}
	sub := args[0]
	fs := flag.NewFlagSet("policy "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, policyUsage) }
	controls := fs.String("controls", "", "lint: comma-separated control ids that for_control may name")
	run := fs.String("run", "", "test: run only the cases and Rego tests whose names match this regular expression")
	verbose := fs.Bool("v", false, "test: list passing cases and tests too")
	whatIf := whatIfFlags(fs)
	files, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	switch sub {
	case "lint":
		if len(files) == 0 {
			return errors.New("usage: veritrail policy lint [--controls ID,...] FILE...")
		}
		return lintPolicies(files, knownControls(*controls), stdout)
	case "compile":
		if len(files) != 1 {
			return errors.New("usage: veritrail policy compile FILE")
		}
		return compilePolicy(files[0], stdout)
	case "test":
		if len(files) == 0 {
			return errors.New("usage: veritrail policy test [--run REGEXP] [-v] FILE...")
		}
		filter, err := regexp.Compile(*run)
		if err != nil {
			return fmt.Errorf("--run: %w", err)
		}
		return policytest.Run(ctx, files, policytest.Options{Filter: filter, Verbose: *verbose}, stdout)
	case "what-if":
		if len(files) != 1 {
			return errors.New("usage: veritrail policy what-if --environment ENV [--host URL] [--api-token KEY] [--org ORG] FILE")
		}
		return runWhatIf(ctx, whatIf, files[0], stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, policyUsage)
		return nil
	}
	fmt.Fprint(stderr, policyUsage)
	return fmt.Errorf("unknown policy subcommand %q", sub)
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
