package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

// What `veritrail admin rejected-messages` and `veritrail admin replay` do: they read and write
// the store directly (either mode's), as the other admin commands do; the evaluators perform
// the replays.

// RejectedLine is a rejected message as `rejected-messages --json` prints it, one per line.
type RejectedLine struct {
	ID                string          `json:"id"`
	Org               string          `json:"org"`
	Kind              string          `json:"kind"`
	PartitionKey      string          `json:"partition_key"`
	State             string          `json:"state"`
	Class             string          `json:"class"`
	Reason            string          `json:"reason"`
	RejectedAt        float64         `json:"rejected_at"`
	ReplayRequestedAt float64         `json:"replay_requested_at"`
	ReplayedAt        float64         `json:"replayed_at"`
	Payload           json.RawMessage `json:"payload"` // its JSON, or a string when it is not JSON
}

// ListRejected writes the rejected messages of the organization named org (of every
// organization when org is ""), newest first, in state (any when ""): a table, or one JSON
// object per line with the payload when asJSON.
func ListRejected(ctx context.Context, st store.Store, w io.Writer, org string, state store.ReplayState, asJSON bool) error {
	switch state {
	case "", store.StateRejected, store.StateReplayRequested, store.StateReplayed:
	default:
		return fmt.Errorf("unknown state %q: rejected, replay_requested or replayed", state)
	}
	f := store.RejectedFilter{State: state}
	if org != "" {
		o, err := st.OrgByName(ctx, org)
		if err != nil {
			return fmt.Errorf("organization %q: %w", org, err)
		}
		f.OrgID = o.ID
	}
	names := orgNames{st: st, byID: map[string]string{}}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "ID\tORG\tKIND\tSTATE\tREJECTED\tCLASS\tREASON")
	}
	const page = 500
	count := 0
	for n := 1; ; n++ {
		f.Page = store.Page{Page: n, PerPage: page}
		list, _, err := st.ListRejected(ctx, f)
		if err != nil {
			return err
		}
		for _, m := range list {
			if err := writeRejected(ctx, tw, w, names, m, asJSON); err != nil {
				return err
			}
		}
		count += len(list)
		if len(list) < page {
			break
		}
	}
	if !asJSON {
		fmt.Fprintf(tw, "(%d rejected messages)\n", count)
	}
	return tw.Flush()
}

func writeRejected(ctx context.Context, tw, w io.Writer, names orgNames, m store.RejectedMessage, asJSON bool) error {
	org := names.of(ctx, m.OrgID)
	if asJSON {
		payload := json.RawMessage(m.Payload)
		if !json.Valid(payload) {
			payload, _ = json.Marshal(strings.ToValidUTF8(string(m.Payload), "\uFFFD"))
		}
		b, err := json.Marshal(RejectedLine{ID: m.ID, Org: org, Kind: m.Kind, PartitionKey: m.PartitionKey, State: string(m.State),
			Class: string(m.Class), Reason: m.Reason, RejectedAt: m.RejectedAt, ReplayRequestedAt: m.RequestedAt,
			ReplayedAt: m.ReplayedAt, Payload: payload})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	at := time.UnixMicro(int64(m.RejectedAt * 1e6)).UTC().Format(time.RFC3339)
	reason := strings.ReplaceAll(m.Reason, "\n", " ")
	kind := m.Kind
	if kind == "" {
		kind = "-"
	}
	_, err := fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, org, kind, m.State, at, m.Class, reason)
	return err
}

// orgNames names organizations by ID, each looked up once.
type orgNames struct {
	st   store.Reader
	byID map[string]string
}

func (n orgNames) of(ctx context.Context, id string) string {
	if id == "" {
		return "-"
	}
	if name, ok := n.byID[id]; ok {
		return name
	}
	name := id // an organization deleted since, or an ID the message made up
	if o, err := n.st.OrgByID(ctx, id); err == nil {
		name = o.Name
	}
	n.byID[id] = name
	return name
}

// ReplayRejected asks for the replay of the rejected message id of the organization named org,
// or of every rejected message of org when id is "", then waits up to wait for the evaluators
// to perform them and writes each outcome to w. A replay not performed within wait is still
// requested: an evaluator performs it when one runs.
func ReplayRejected(ctx context.Context, st store.Store, w io.Writer, org, id string, wait time.Duration) error {
	o, err := st.OrgByName(ctx, org)
	if err != nil {
		return fmt.Errorf("organization %q: %w", org, err)
	}
	at := float64(time.Now().UnixMicro()) / 1e6
	var ids []string
	err = st.UpdateIdentities(ctx, func(tx store.IdentityTx) error {
		ids = ids[:0]
		if id != "" {
			m, err := tx.RequestReplay(ctx, o.ID, id, at)
			if err != nil {
				return err
			}
			if m.State == store.StateReplayed {
				fmt.Fprintf(w, "%s was replayed already (at %s); it is not applied again\n", id,
					time.UnixMicro(int64(m.ReplayedAt*1e6)).UTC().Format(time.RFC3339))
				return nil
			}
			ids = append(ids, id)
			return nil
		}
		if _, err := tx.RequestReplays(ctx, o.ID, at); err != nil {
			return err
		}
		list, _, err := tx.ListRejected(ctx, store.RejectedFilter{OrgID: o.ID, State: store.StateReplayRequested})
		for _, m := range list {
			ids = append(ids, m.ID)
		}
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no rejected message %q in organization %s", id, org)
	}
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		if id == "" {
			fmt.Fprintf(w, "organization %s has no rejected message to replay\n", org)
		}
		return nil
	}
	fmt.Fprintf(w, "asked for the replay of %d rejected messages of %s\n", len(ids), org)
	return waitReplays(ctx, st, w, o.ID, ids, wait)
}

// waitReplays reports each of ids once it is no longer waiting for its replay, or, when wait
// passes first, those still waiting.
func waitReplays(ctx context.Context, st store.Store, w io.Writer, orgID string, ids []string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	pending := slices.Clone(ids)
	for {
		left := pending[:0]
		for _, id := range pending {
			m, err := st.RejectedMessage(ctx, orgID, id)
			if err != nil {
				return err
			}
			switch m.State {
			case store.StateReplayed:
				fmt.Fprintf(w, "%s replayed\n", id)
			case store.StateRejected:
				fmt.Fprintf(w, "%s rejected again: %s\n", id, m.Reason)
			default:
				left = append(left, id)
			}
		}
		pending = left
		if len(pending) == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			fmt.Fprintf(w, "%d replays are still requested; an evaluator performs them when one runs: %s\n", len(pending),
				strings.Join(pending, " "))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
