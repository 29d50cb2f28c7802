package evaluate

import (
	"context"
	"errors"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// applyNotificationRule creates (numbering it), replaces or deletes a notification rule. Rule
// writes of one organization share a partition key, so numbers follow the order ingest
// accepted the rules in.
func applyNotificationRule(ctx context.Context, tx store.Tx, e *contract.Envelope) error {
	n := e.Notification
	if n == nil {
		return permanent("notification rule without body")
	}
	r := store.NotificationRule{ID: n.ID, OrgID: e.OrgID, Number: n.Number, Name: n.Name, Environments: n.Environments,
		Triggers: n.Triggers, CreatedBy: e.Actor.Name, CreatedAt: e.At, LastModifiedAt: e.At}
	for _, t := range n.Targets {
		r.Targets = append(r.Targets, store.NotificationTarget{ID: t.ID, Type: t.Type, URL: t.URL, Secret: t.Secret,
			Emails: t.Emails, Plugin: t.Plugin, Context: t.Context})
	}
	switch e.Kind {
	case contract.KindNotificationCreated:
		_, err := tx.InsertNotificationRule(ctx, r)
		return err
	case contract.KindNotificationUpdated:
		return classify(tx.UpdateNotificationRule(ctx, r)) // deleted meanwhile: nothing to update
	default:
		err := tx.DeleteNotificationRule(ctx, e.OrgID, n.Number, e.At)
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted already
		}
		return err
	}
}
