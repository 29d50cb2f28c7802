package ingest

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/store"
)

// AuditEntryView is one audit record: who (key and display name) did what (operation and the
// path it targeted) when, and whether it applied.
type AuditEntryView struct {
	ID        string  `json:"id"`
	KeyID     string  `json:"key_id"`
	Actor     string  `json:"actor" doc:"display name of the caller, as created_by shows it"`
	Operation string  `json:"operation" doc:"the operation ID in this OpenAPI description"`
	Target    string  `json:"target" doc:"the request path below /api/v2"`
	Outcome   string  `json:"outcome" enum:"applied,rejected" doc:"rejected: accepted, but it could not apply (e.g. its flow was archived first)"`
	At        float64 `json:"at"`
}

func (a *API) registerAudit() {
	type auditInput struct {
		OrgPath
		Page    int    `query:"page" minimum:"0" doc:"Page number, from 1"`
		PerPage int    `query:"per_page" minimum:"0" maximum:"500" doc:"Records per page (default 50)"`
		KeyID   string `query:"key_id" doc:"Only the records of this API key"`
	}
	type auditOutput struct {
		Body struct {
			Data       []AuditEntryView `json:"data"`
			Pagination Pagination       `json:"pagination"`
		}
	}
	huma.Register(a.huma, op(http.MethodGet, "/audit/{org}", "listAudit", PrivAdmin,
		"The audit log: every accepted write of the organization, newest first", "Audit"),
		func(ctx context.Context, in *auditInput) (*auditOutput, error) {
			p := principalFrom(ctx)
			pg := pageOf(in.Page, in.PerPage, 50)
			recs, total, err := a.store.ListAudit(ctx, p.Org.ID, store.AuditFilter{KeyID: in.KeyID, Page: pg})
			if err != nil {
				return nil, a.internal(ctx, "list audit records", err)
			}
			out := &auditOutput{}
			out.Body.Data = make([]AuditEntryView, 0, len(recs))
			for _, r := range recs {
				out.Body.Data = append(out.Body.Data, AuditEntryView{ID: r.ID, KeyID: r.KeyID, Actor: r.Actor,
					Operation: r.Operation, Target: r.Target, Outcome: r.Outcome, At: r.At})
			}
			out.Body.Pagination = pagination(total, pg)
			return out, nil
		})
}
