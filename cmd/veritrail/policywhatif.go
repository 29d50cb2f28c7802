package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// flowWhatIfAnswer is the part of the server's answer to a template's what-if that the summary prints.
type flowWhatIfAnswer struct {
	Flow        string `json:"flow"`
	Template    string `json:"template"`
	TrailCount  int    `json:"trail_count"`
	JudgedCount int    `json:"judged_count"`
	Changed     int    `json:"changed_count"`
	Worse       int    `json:"worse_count"`
	Trails      []struct {
		Name         string   `json:"name"`
		CurrentState string   `json:"current_state"`
		DraftState   string   `json:"draft_state"`
		Changed      bool     `json:"changed"`
		Reasons      []string `json:"reasons"`
	} `json:"trails"`
}

// runTemplateWhatIf sends a draft flow template to the server's what-if endpoint of the flow and prints which of
// its latest trails would change state, and why a trail would not be compliant. It fails when a trail compliant
// today would not be.
func runTemplateWhatIf(ctx context.Context, o whatIfOptions, file string, stdout io.Writer) error {
	switch {
	case o.token == "":
		return errors.New("what-if: --api-token (or VERITRAIL_API_TOKEN / KOSLI_API_TOKEN) is required")
	case o.org == "":
		return errors.New("what-if: --org (or VERITRAIL_ORG / KOSLI_ORG) is required")
	case o.flow == "":
		return errors.New("what-if: --flow is required for a flow template")
	}
	content, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	body, contentType, err := whatIfBody(o.name, "template_file", filepath.Base(file), content)
	if err != nil {
		return err
	}
	u := strings.TrimRight(o.host, "/") + "/api/v2/flows/" + url.PathEscape(o.org) + "/" + url.PathEscape(o.flow) + "/what-if"
	if o.trails > 0 {
		u += "?limit=" + strconv.Itoa(o.trails)
	}
	answer, err := postWhatIf(ctx, u, o.token, contentType, body)
	if err != nil {
		return err
	}
	var w flowWhatIfAnswer
	if err := json.Unmarshal(answer, &w); err != nil {
		return fmt.Errorf("what-if: the server's answer is not what-if JSON: %w", err)
	}
	if o.json {
		if _, err := stdout.Write(append(answer, '\n')); err != nil {
			return err
		}
	} else {
		printTemplateWhatIf(stdout, w)
	}
	if w.Worse > 0 {
		return fmt.Errorf("%d trail(s) compliant today would not be under template '%s'", w.Worse, w.Template)
	}
	return nil
}

func printTemplateWhatIf(w io.Writer, a flowWhatIfAnswer) {
	if a.TrailCount == 0 {
		fmt.Fprintf(w, "Flow '%s' has no trail yet: nothing to judge.\n", a.Flow)
		return
	}
	fmt.Fprintf(w, "Template '%s' against the latest %d of %d trail(s) of flow '%s': %d would change state.\n",
		a.Template, a.JudgedCount, a.TrailCount, a.Flow, a.Changed)
	for _, t := range a.Trails {
		if t.Changed {
			fmt.Fprintf(w, "CHANGE  %s  %s -> %s\n", t.Name, t.CurrentState, t.DraftState)
		} else {
			fmt.Fprintf(w, "SAME    %s  %s\n", t.Name, t.DraftState)
		}
		for _, r := range t.Reasons {
			fmt.Fprintf(w, "      %s\n", r)
		}
	}
}
