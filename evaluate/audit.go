package evaluate

import (
	"context"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// recordAudit writes the audit record a message carries, keyed by the message ID so that a
// redelivery records nothing new. It runs in the transaction that applies the message: the
// evidence and its audit record exist together or not at all. A message without a request
// (written before audit records existed) records nothing.
func recordAudit(ctx context.Context, w store.AuditWriter, env *contract.Envelope, outcome string) error {
	r, ok := auditRecord(env, outcome)
	if !ok {
		return nil
	}
	return w.InsertAudit(ctx, r)
}

// auditRecord is the audit record env carries, if it carries one.
func auditRecord(env *contract.Envelope, outcome string) (store.AuditRecord, bool) {
	if env.Request == nil {
		return store.AuditRecord{}, false
	}
	return store.AuditRecord{
		ID: env.ID, OrgID: env.OrgID, KeyID: env.Actor.KeyID, Actor: env.Actor.Name,
		Operation: env.Request.Operation, Target: env.Request.Target, Outcome: outcome, At: env.At,
	}, true
}
