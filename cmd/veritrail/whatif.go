package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/veritrail/veritrail/policies/policytest"
)

// whatIfOptions are the flags of "policy what-if": where the server is and which environment to judge. Each
// defaults to VERITRAIL_<NAME>, then to the Kosli CLI's KOSLI_<NAME>, so a pipeline set up for the Kosli CLI needs
// nothing more. They are a client's options, not the server's settings (package config).
type whatIfOptions struct {
	host, token, org, environment, name string
	json                                bool
	flow, kind                          string // for a flow template: the flow whose trails are judged
	trails                              int    // for a flow template: how many of the latest trails (0: the server's default)
}

func whatIfCommand() *cobra.Command {
	var o whatIfOptions
	cmd := &cobra.Command{
		Use:   "what-if (--environment ENV | --flow FLOW) FILE",
		Short: "ask the server how a draft policy or flow template would judge what is running or reported",
		Long: `Ask the server how the draft policy FILE would judge the latest snapshot of ENV, without attaching or
storing it: every artifact that would fail, and why. Fails when one would.

For a flow template (recognised by its shape, or --kind template), judge the latest trails of FLOW (--trails,
default 100) as if the draft were their template, without storing it: which trails would change state, and
what keeps each from being compliant. Fails when a trail compliant today would not be.

--host, --api-token and --org default to VERITRAIL_HOST, VERITRAIL_API_TOKEN and VERITRAIL_ORG, then to
KOSLI_HOST, KOSLI_API_TOKEN and KOSLI_ORG; --host to http://127.0.0.1:8080.`,
		Args: filesArgs(1, 1),
		RunE: func(cmd *cobra.Command, files []string) error {
			kind, err := policytest.ParseKind(o.kind)
			if err != nil {
				return fmt.Errorf("--kind: %w", err)
			}
			if kind == "" {
				content, err := os.ReadFile(files[0])
				if err != nil {
					return err
				}
				kind = policytest.KindOf(files[0], content)
			}
			if kind == policytest.KindTemplate {
				return runTemplateWhatIf(cmd.Context(), o, files[0], cmd.OutOrStdout())
			}
			return runWhatIf(cmd.Context(), o, files[0], cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.host, "host", firstEnv("http://127.0.0.1:8080", "VERITRAIL_HOST", "KOSLI_HOST"), "the Veritrail server (env VERITRAIL_HOST or KOSLI_HOST)")
	f.StringVar(&o.token, "api-token", firstEnv("", "VERITRAIL_API_TOKEN", "KOSLI_API_TOKEN"), "API key (env VERITRAIL_API_TOKEN or KOSLI_API_TOKEN)")
	f.StringVar(&o.org, "org", firstEnv("", "VERITRAIL_ORG", "KOSLI_ORG"), "organization (env VERITRAIL_ORG or KOSLI_ORG)")
	f.StringVar(&o.environment, "environment", firstEnv("", "VERITRAIL_ENVIRONMENT", "KOSLI_ENVIRONMENT"),
		"environment whose latest snapshot is judged (env VERITRAIL_ENVIRONMENT or KOSLI_ENVIRONMENT)")
	f.StringVar(&o.name, "name", "", "what to call the draft in the answer (default: the file's name)")
	f.BoolVar(&o.json, "json", false, "print the server's answer as JSON")
	f.StringVar(&o.flow, "flow", firstEnv("", "VERITRAIL_FLOW", "KOSLI_FLOW"),
		"flow whose latest trails a draft template judges (env VERITRAIL_FLOW or KOSLI_FLOW)")
	f.IntVar(&o.trails, "trails", 0, "how many of the flow's latest trails a draft template judges (default 100, at most 1000)")
	kindFlag(cmd, &o.kind)
	return cmd
}

// firstEnv is the value of the first of the environment variables that is set, else def.
func firstEnv(def string, names ...string) string {
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok && v != "" {
			return v
		}
	}
	return def
}

// whatIfAnswer is the part of the server's answer the summary prints.
type whatIfAnswer struct {
	Environment   string `json:"environment"`
	SnapshotIndex *int   `json:"snapshot_index"`
	Policy        string `json:"policy"`
	ArtifactCount int    `json:"artifact_count"`
	FailingCount  int    `json:"failing_count"`
	Artifacts     []struct {
		Name               string `json:"name"`
		Fingerprint        string `json:"fingerprint"`
		Compliant          bool   `json:"compliant"`
		Allowlisted        bool   `json:"allowlisted"`
		CurrentlyCompliant *bool  `json:"currently_compliant"`
		Evaluation         struct {
			RuleEvaluations []struct {
				Rule struct {
					Type string `json:"type"`
					ID   string `json:"id"`
				} `json:"rule"`
				Satisfied   bool `json:"satisfied"`
				Resolutions []struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"resolutions"`
			} `json:"rule_evaluations"`
		} `json:"policy_evaluation"`
	} `json:"artifacts"`
}

// runWhatIf sends a draft policy to the server's what-if endpoint and prints which artifacts of the environment's
// latest snapshot would fail and why. It fails when some would.
func runWhatIf(ctx context.Context, o whatIfOptions, file string, stdout io.Writer) error {
	switch {
	case o.token == "":
		return errors.New("what-if: --api-token (or VERITRAIL_API_TOKEN / KOSLI_API_TOKEN) is required")
	case o.org == "":
		return errors.New("what-if: --org (or VERITRAIL_ORG / KOSLI_ORG) is required")
	case o.environment == "":
		return errors.New("what-if: --environment is required")
	}
	content, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	body, contentType, err := whatIfBody(o.name, "policy_file", filepath.Base(file), content)
	if err != nil {
		return err
	}
	u := strings.TrimRight(o.host, "/") + "/api/v2/environments/" + url.PathEscape(o.org) + "/" + url.PathEscape(o.environment) + "/what-if"
	answer, err := postWhatIf(ctx, u, o.token, contentType, body)
	if err != nil {
		return err
	}
	var w whatIfAnswer
	if err := json.Unmarshal(answer, &w); err != nil {
		return fmt.Errorf("what-if: the server's answer is not what-if JSON: %w", err)
	}
	if o.json {
		if _, err := stdout.Write(append(answer, '\n')); err != nil {
			return err
		}
	} else {
		printWhatIf(stdout, w)
	}
	if w.FailingCount > 0 {
		return fmt.Errorf("%d of %d artifact(s) would fail policy '%s'", w.FailingCount, w.ArtifactCount, w.Policy)
	}
	return nil
}

// whatIfBody is the multipart body of a what-if: the payload (without a filename, as the Kosli CLI sends JSON
// parts) and the draft in the part filePart (policy_file, or template_file for a flow template).
func whatIfBody(name, filePart, filename string, content []byte) ([]byte, string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	payload, err := json.Marshal(map[string]string{"name": name})
	if err != nil {
		return nil, "", err
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="payload"`)
	part, err := w.CreatePart(h)
	if err == nil {
		_, err = part.Write(payload)
	}
	if err == nil {
		part, err = w.CreateFormFile(filePart, filename)
	}
	if err == nil {
		_, err = part.Write(content)
	}
	if err == nil {
		err = w.Close()
	}
	return buf.Bytes(), w.FormDataContentType(), err
}

// serverError words an error answer the way the Kosli CLI does: the message, then the fields.
func serverError(status int, body []byte) error {
	var e struct {
		Message string            `json:"message"`
		Errors  map[string]string `json:"errors"`
	}
	if json.Unmarshal(body, &e) != nil || e.Message == "" {
		return fmt.Errorf("what-if: the server answered %d: %s", status, strings.TrimSpace(string(body)))
	}
	msg := e.Message
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range e.Errors {
			if !yield(k) {
				return
			}
		}
	}) {
		msg += fmt.Sprintf("\n  %s: %s", k, e.Errors[k])
	}
	return fmt.Errorf("what-if: %s", msg)
}

func printWhatIf(w io.Writer, a whatIfAnswer) {
	if a.SnapshotIndex == nil {
		fmt.Fprintf(w, "Environment '%s' has no snapshot yet: nothing to judge.\n", a.Environment)
		return
	}
	fmt.Fprintf(w, "Policy '%s' against %s#%d: %d of %d artifact(s) would fail.\n", a.Policy, a.Environment, *a.SnapshotIndex,
		a.FailingCount, a.ArtifactCount)
	for _, art := range a.Artifacts {
		verdict := "PASS"
		if !art.Compliant {
			verdict = "FAIL"
		}
		note := ""
		switch {
		case art.Allowlisted:
			note = " (allowlisted)"
		case art.CurrentlyCompliant != nil && *art.CurrentlyCompliant != art.Compliant:
			note = fmt.Sprintf(" (today: %s)", map[bool]string{true: "compliant", false: "non-compliant"}[*art.CurrentlyCompliant])
		}
		fmt.Fprintf(w, "%s  %s  %.12s%s\n", verdict, art.Name, art.Fingerprint, note)
		if art.Compliant && !art.Allowlisted {
			continue
		}
		for _, r := range art.Evaluation.RuleEvaluations {
			if r.Satisfied {
				continue
			}
			for _, res := range r.Resolutions {
				fmt.Fprintf(w, "      %s: %s: %s\n", r.Rule.ID, res.Type, res.Message)
			}
		}
	}
}

// postWhatIf sends a what-if request (a multipart body) with the key as a bearer token and
// returns the answer's body; an answer other than 200 is the server's error.
func postWhatIf(ctx context.Context, u, token, contentType string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("what-if: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", contentType)
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("what-if: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("what-if: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, serverError(resp.StatusCode, answer)
	}
	return answer, nil
}
