package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// ApprovalInput is the body of report/request approval as the Kosli CLI sends it.
type ApprovalInput struct {
	ArtifactFingerprint string `json:"artifact_fingerprint" pattern:"^[a-f0-9]{64}$"`
	Environment         string `json:"environment,omitempty" required:"false"`
	Description         string `json:"description,omitempty" required:"false"`
	// SrcCommitList holds the commits of the release, as shas or {commit_sha, artifact_fingerprints}.
	SrcCommitList []json.RawMessage `json:"src_commit_list,omitempty" required:"false" nullable:"true"`
	OldestCommit  string            `json:"oldest_commit,omitempty" required:"false"`
	// Approvals given with the report; none means the approval is requested (PENDING).
	Approvals []ApprovalEntry `json:"approvals,omitempty" required:"false" nullable:"true"`
	UserData  json.RawMessage `json:"user_data,omitempty" required:"false"`
}

// ApprovalEntry is one individual approval or rejection.
type ApprovalEntry struct {
	State       string  `json:"state,omitempty" required:"false" enum:"APPROVED,UNAPPROVED,"`
	Comment     string  `json:"comment,omitempty" required:"false"`
	ApprovedBy  string  `json:"approved_by,omitempty" required:"false"`
	ApprovalURL string  `json:"approval_url,omitempty" required:"false"`
	Timestamp   float64 `json:"timestamp,omitempty" required:"false"`
}

// approvalState is PENDING without approvals, UNAPPROVED when any entry rejects, else APPROVED.
func approvalState(entries []ApprovalEntry) string {
	if len(entries) == 0 {
		return "PENDING"
	}
	for _, e := range entries {
		if strings.EqualFold(e.State, "UNAPPROVED") {
			return "UNAPPROVED"
		}
	}
	return "APPROVED"
}

func (a *API) registerApprovals() {
	type createInput struct {
		FlowPath
		Body ApprovalInput
	}
	o := op(http.MethodPost, "/approvals/{org}/{flow}", "reportApproval", PrivWrite, "Record a release approval (or request one)", "Approvals")
	o.DefaultStatus = http.StatusCreated
	huma.Register(a.huma, o, func(ctx context.Context, in *createInput) (*stringOutput, error) {
		p := principalFrom(ctx)
		b := in.Body
		flow, err := a.flowByName(ctx, p, in.Flow)
		if err != nil {
			return nil, err
		}
		art, err := a.artifactByPrefix(ctx, p, flow, b.ArtifactFingerprint, "")
		if err != nil {
			return nil, err
		}
		if b.Environment != "" {
			if _, err := a.environmentByName(ctx, p, b.Environment); err != nil {
				return nil, err
			}
		}
		commits := make([]map[string]any, 0, len(b.SrcCommitList))
		for i, raw := range b.SrcCommitList {
			var sha string
			if json.Unmarshal(raw, &sha) == nil {
				commits = append(commits, map[string]any{"commit_sha": sha, "artifact_fingerprints": []string{}})
				continue
			}
			var c map[string]any
			if json.Unmarshal(raw, &c) != nil {
				return nil, fieldError(fmt.Sprintf("src_commit_list[%d]", i), "Input should be a commit sha or {commit_sha, artifact_fingerprints}")
			}
			commits = append(commits, c)
		}
		now := now()
		entries := make([]ApprovalEntry, len(b.Approvals))
		for i, e := range b.Approvals {
			if e.Timestamp == 0 {
				e.Timestamp = now
			}
			if e.ApprovedBy == "" {
				e.ApprovedBy = p.Name
			}
			entries[i] = e
		}
		commitsJSON, _ := json.Marshal(commits) // decoded JSON re-encodes
		entriesJSON, _ := json.Marshal(entries)
		base := b.OldestCommit
		env := &contract.Envelope{Kind: contract.KindApprovalReported, Approval: &contract.ApprovalReport{
			ID: newID(), FlowID: flow.ID, Fingerprint: art.Fingerprint, ArtifactName: art.Filename, BaseArtifact: base,
			Environment: b.Environment, Description: b.Description, SrcCommitList: commitsJSON, Approvals: entriesJSON,
			State: approvalState(entries), UserData: orJSON(b.UserData, "{}"),
		}}
		if err := a.publish(ctx, p, env); err != nil {
			return nil, err
		}
		return &stringOutput{Status: http.StatusCreated, Body: fmt.Sprintf("Approval for artifact '%s' was recorded", art.Fingerprint)}, nil
	})

	type getInput struct {
		FlowPath
		Number int `path:"number" minimum:"1"`
	}
	type getOutput struct{ Body map[string]any }
	huma.Register(a.huma, op(http.MethodGet, "/approvals/{org}/{flow}/{number}", "getApproval", PrivRead, "Get an approval by number", "Approvals"),
		func(ctx context.Context, in *getInput) (*getOutput, error) {
			p := principalFrom(ctx)
			flow, err := a.flowByName(ctx, p, in.Flow)
			if err != nil {
				return nil, err
			}
			ap, err := a.store.Approval(ctx, flow.ID, in.Number)
			if errors.Is(err, store.ErrNotFound) {
				return nil, apiError(http.StatusNotFound, "Approval number %d does not exist in flow '%s' belonging to organization '%s'", in.Number, flow.Name, p.Org.Name)
			}
			if err != nil {
				return nil, a.internal(ctx, "look up approval", err)
			}
			return &getOutput{Body: approvalView(ap)}, nil
		})

	type listInput struct {
		FlowPath
		Page    int `query:"page" minimum:"1" default:"1"`
		PerPage int `query:"per_page" minimum:"1" maximum:"100" default:"15"`
	}
	huma.Register(a.huma, op(http.MethodGet, "/approvals/{org}/{flow}", "listApprovals", PrivRead, "List approvals, newest first", "Approvals"),
		func(ctx context.Context, in *listInput) (*listOutput[map[string]any], error) {
			p := principalFrom(ctx)
			flow, err := a.flowByName(ctx, p, in.Flow)
			if err != nil {
				return nil, err
			}
			aps, _, err := a.store.ListApprovals(ctx, flow.ID, store.Page{Page: in.Page, PerPage: in.PerPage})
			if err != nil {
				return nil, a.internal(ctx, "list approvals", err)
			}
			out := &listOutput[map[string]any]{Body: []map[string]any{}}
			for _, ap := range aps {
				out.Body = append(out.Body, approvalView(ap))
			}
			return out, nil
		})
}

func approvalView(ap store.Approval) map[string]any {
	v := map[string]any{}
	_ = json.Unmarshal(ap.Doc, &v) // written by the evaluator as an object
	v["release_number"] = ap.Number
	v["state"] = ap.State
	v["created_at"] = ap.CreatedAt
	v["last_modified_at"] = ap.CreatedAt
	return v
}
