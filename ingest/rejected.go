package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/store"
)

// Rejected messages are writes that were answered 2xx but that the evaluator could never apply
// (docs/ARCHITECTURE.md, "Rejected messages"). Admins list them, read them and ask for a replay
// once the cause is fixed; the evaluator performs the replay.

// RejectedMessageView is a rejected message as the API shows it.
type RejectedMessageView struct {
	ID           string `json:"id" doc:"the message ID, as the audit log shows it"`
	Kind         string `json:"kind" doc:"what the message asked for, e.g. attestation.reported"`
	PartitionKey string `json:"partition_key" doc:"the key that ordered the message on the bus"`
	Reason       string `json:"reason" doc:"why the last attempt to apply it failed"`
	Class        string `json:"class" enum:"permanent,unknown" doc:"permanent: retrying cannot help; unknown: it failed every retry while the store worked"`
	// RejectedAt is when it was last rejected: on its delivery, or when a replay failed.
	RejectedAt        float64 `json:"rejected_at"`
	State             string  `json:"state" enum:"rejected,replay_requested,replayed"`
	ReplayRequestedAt float64 `json:"replay_requested_at" doc:"when a replay was last asked for; 0 for never"`
	ReplayedAt        float64 `json:"replayed_at" doc:"when a replay applied it; 0 for never"`
	// Payload is the message as it came from the bus: its JSON when it is JSON, else a string.
	Payload json.RawMessage `json:"payload"`
}

func rejectedView(m store.RejectedMessage) RejectedMessageView {
	payload := json.RawMessage(m.Payload)
	if !validJSON(m.Payload) {
		payload, _ = json.Marshal(strings.ToValidUTF8(string(m.Payload), "\uFFFD")) // a string always encodes
	}
	return RejectedMessageView{ID: m.ID, Kind: m.Kind, PartitionKey: m.PartitionKey, Reason: m.Reason, Class: string(m.Class),
		RejectedAt: m.RejectedAt, State: string(m.State), ReplayRequestedAt: m.RequestedAt, ReplayedAt: m.ReplayedAt, Payload: payload}
}

// RejectedPath names a rejected message.
type RejectedPath struct {
	Org string `path:"org" doc:"Organization name"`
	ID  string `path:"id" doc:"Message ID"`
}

func (a *API) registerRejected() {
	const tag = "Rejected messages"
	type rejectedListInput struct {
		OrgPath
		Page    int    `query:"page" minimum:"0" doc:"Page number, from 1"`
		PerPage int    `query:"per_page" minimum:"0" maximum:"500" doc:"Messages per page (default 50)"`
		State   string `query:"state" enum:"rejected,replay_requested,replayed" doc:"Only the messages in this state"`
	}
	type rejectedListOutput struct {
		Body struct {
			Data       []RejectedMessageView `json:"data"`
			Pagination Pagination            `json:"pagination"`
		}
	}
	huma.Register(a.huma, op(http.MethodGet, "/rejected-messages/{org}", "listRejectedMessages", PrivAdmin,
		"Writes that were accepted but could never apply, newest first", tag),
		func(ctx context.Context, in *rejectedListInput) (*rejectedListOutput, error) {
			p := principalFrom(ctx)
			pg := pageOf(in.Page, in.PerPage, 50)
			list, total, err := a.store.ListRejected(ctx, store.RejectedFilter{OrgID: p.Org.ID, State: store.ReplayState(in.State), Page: pg})
			if err != nil {
				return nil, a.internal(ctx, "list rejected messages", err)
			}
			out := &rejectedListOutput{}
			out.Body.Data = make([]RejectedMessageView, 0, len(list))
			for _, m := range list {
				out.Body.Data = append(out.Body.Data, rejectedView(m))
			}
			out.Body.Pagination = pagination(total, pg)
			return out, nil
		})

	type rejectedOutput struct{ Body RejectedMessageView }
	huma.Register(a.huma, op(http.MethodGet, "/rejected-messages/{org}/{id}", "getRejectedMessage", PrivAdmin,
		"Get a rejected message with its payload", tag),
		func(ctx context.Context, in *RejectedPath) (*rejectedOutput, error) {
			p := principalFrom(ctx)
			m, err := a.store.RejectedMessage(ctx, p.Org.ID, in.ID)
			if err != nil {
				return nil, a.rejectedErr(ctx, p, in.ID, "look up rejected message", err)
			}
			return &rejectedOutput{Body: rejectedView(m)}, nil
		})

	o := op(http.MethodPost, "/rejected-messages/{org}/{id}/replay", "replayRejectedMessage", PrivAdmin,
		"Ask for a rejected message to be applied again, once what made it fail is fixed", tag)
	o.Description = "An evaluator applies the message within a second or so, as it was sent, after every message " +
		"accepted since: read the message again for its state (replayed, or rejected with a new reason). A message " +
		"replayed already is not applied again."
	o.DefaultStatus = http.StatusAccepted
	huma.Register(a.huma, o, func(ctx context.Context, in *RejectedPath) (*rejectedOutput, error) {
		p := principalFrom(ctx)
		var m store.RejectedMessage
		err := a.changeIdentities(ctx, p, func(tx store.IdentityTx) error {
			var err error
			m, err = tx.RequestReplay(ctx, p.Org.ID, in.ID, unixSeconds(a.clock()))
			return err
		})
		if err != nil {
			return nil, a.rejectedErr(ctx, p, in.ID, "request a replay", err)
		}
		return &rejectedOutput{Body: rejectedView(m)}, nil
	})
}

func (a *API) rejectedErr(ctx context.Context, p *Principal, id, what string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return apiError(http.StatusNotFound, "Rejected message '%s' does not exist in organization '%s'", id, p.Org.Name)
	}
	return a.internal(ctx, what, err)
}
