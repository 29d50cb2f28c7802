package evaluate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cenkalti/backoff/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// How a message that fails is treated (docs/ARCHITECTURE.md, "Rejected messages"):
//
//   - a permanent error (the store refuses the data, a record it names does not exist, the
//     message cannot be decoded or lacks its body) sets the message aside as a rejected
//     message, in the transaction that marks it applied, and the messages behind it go on; a
//     unique key taken (store.ErrConflict) is tried once more first, since a concurrent
//     transaction may have taken it a moment before;
//   - a transient error (the database is unreachable, busy, deadlocked, shutting down) is
//     returned, so the consumer retries the message with backoff and then hands it back to the
//     bus, which delivers it again: it is retried until it applies and never set aside;
//   - an error of unknown class is retried here with backoff, UnknownAttempts times in all;
//     then, if the store still commits an empty transaction (so it is this message that fails,
//     not the store), the message is set aside with class unknown; otherwise it counts as
//     transient.

// panicError is a panic of the apply code, which no retry is likely to cure.
type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprintf("panic: %v", p.v) }

// classify is the class of an apply error: the evaluator's own permanent errors, panics, and
// what the store says of its errors.
func (e *Evaluator) classify(err error) store.ErrorClass {
	var p panicError
	switch {
	case errors.Is(err, ErrPermanent):
		return store.ClassPermanent
	case errors.As(err, &p):
		return store.ClassUnknown
	}
	return e.d.Store.Classify(err)
}

// attempt runs op until it succeeds or its error calls for something else than trying again
// here (see above), and answers the class of its last error.
func (e *Evaluator) attempt(ctx context.Context, op func() error) (store.ErrorClass, error) {
	first := protect(op)
	if first == nil {
		return store.ClassTransient, nil // what nearly every message does: no retry set up
	}
	class, tries, conflicts := store.ClassTransient, 0, 0
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := first
		if tries > 0 {
			if err = protect(op); err == nil {
				return struct{}{}, nil
			}
		}
		tries++
		class = e.classify(err)
		switch {
		case ctx.Err() != nil:
			class = store.ClassTransient // stopping: the bus delivers it again to whoever is next
		case class == store.ClassPermanent && errors.Is(err, store.ErrConflict) && conflicts == 0:
			// A unique key taken by a transaction that committed while this one ran (two flows of
			// one name created at once, two evaluators during a partition handover) is free of
			// the race the second time; a key taken for good is taken again.
			conflicts++
			return struct{}{}, err
		case class == store.ClassUnknown && tries < e.cfg.UnknownAttempts:
			e.d.Log.Warn("evaluate: retrying a message after an unexpected error", "attempt", tries, "err", err)
			return struct{}{}, err
		case class == store.ClassUnknown && e.d.Store.Update(ctx, func(store.Tx) error { return nil }) != nil:
			class = store.ClassTransient // the store itself fails, not this message
		}
		return struct{}{}, backoff.Permanent(err)
	}, backoff.WithBackOff(e.newBackOff()), backoff.WithMaxElapsedTime(0))
	if err != nil && ctx.Err() != nil {
		class = store.ClassTransient
	}
	return class, err
}

// protect runs op and turns its panic into an error.
func protect(op func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError{v}
		}
	}()
	return op()
}

func (e *Evaluator) newBackOff() backoff.BackOff {
	return &backoff.ExponentialBackOff{InitialInterval: e.cfg.RetryInterval, RandomizationFactor: 0.5, Multiplier: 2,
		MaxInterval: 2 * time.Second}
}

// reject sets msg aside: it records the rejected message, marks the message applied (so that
// a redelivery skips it and read-your-writes waiters do not wait for it) and audits it as
// rejected (it was answered 2xx), all in one transaction. env is nil when msg could not be
// decoded. A redelivered message that was rejected before changes nothing.
func (e *Evaluator) reject(ctx context.Context, msg *message.Message, env *contract.Envelope, cause error, class store.ErrorClass) error {
	r := rejectionOf(msg, env, cause, class, e.now())
	inserted := false
	err := e.d.Store.Update(ctx, func(tx store.Tx) error {
		inserted = false
		done, err := tx.Applied(ctx, r.ID)
		if err != nil || done {
			return err
		}
		if err := tx.InsertRejected(ctx, r); err != nil {
			return err
		}
		if env != nil {
			if a, ok := auditRecord(env, store.AuditRejected); ok {
				a.ID, a.OrgID, a.KeyID, a.Actor = r.ID, r.OrgID, clean(a.KeyID, maxField), clean(a.Actor, maxField)
				a.Operation, a.Target = clean(a.Operation, maxField), clean(a.Target, maxField)
				if err := tx.InsertAudit(ctx, a); err != nil {
					return err
				}
			}
		}
		if err := tx.MarkApplied(ctx, r.ID, "", r.RejectedAt); err != nil {
			return err
		}
		inserted = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("evaluate: set aside %s %s: %w", r.Kind, r.ID, err)
	}
	if inserted {
		e.d.Log.Error("evaluate: message rejected; set aside as a dead letter, the messages behind it go on",
			"org", r.OrgID, "id", r.ID, "kind", r.Kind, "class", r.Class, "reason", r.Reason)
	}
	e.notify(nil, nil) // nothing changed but the mark
	return nil
}

// Bounds of what a rejection records of a message beside its payload. The payload is stored
// as bytes; the rest is text, so it is made valid UTF-8 without NUL (which PostgreSQL
// refuses), or setting the message aside would fail as its apply did.
const (
	maxField  = 1024
	maxReason = 4096
)

func rejectionOf(msg *message.Message, env *contract.Envelope, cause error, class store.ErrorClass, at float64) store.RejectedMessage {
	r := store.RejectedMessage{ID: msg.UUID, OrgID: msg.Metadata.Get(contract.MetaOrg), Kind: msg.Metadata.Get(contract.MetaKind),
		PartitionKey: msg.Metadata.Get(contract.MetaPartitionKey), Payload: msg.Payload, Reason: cause.Error(), Class: class,
		RejectedAt: at, State: store.StateRejected}
	if env != nil {
		r.ID, r.OrgID, r.Kind = env.ID, env.OrgID, string(env.Kind)
		if r.PartitionKey == "" {
			r.PartitionKey = env.PartitionKey()
		}
	}
	if r.ID == "" || r.ID != clean(r.ID, maxField) {
		// The ID is what the message is marked applied under: one the store may refuse is replaced
		// by one derived from the payload, the same at every redelivery.
		sum := sha256.Sum256(msg.Payload)
		r.ID = "payload-sha256-" + hex.EncodeToString(sum[:])
	}
	r.OrgID, r.Kind, r.PartitionKey = clean(r.OrgID, maxField), clean(r.Kind, maxField), clean(r.PartitionKey, maxField)
	r.Reason = clean(r.Reason, maxReason)
	return r
}

// clean makes s storable text: valid UTF-8, NUL and other control characters but tab and
// newline shown as escapes, at most limit bytes (and a note of what was cut).
func clean(s string, limit int) string {
	control := func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' }
	if utf8.ValidString(s) && len(s) <= limit && strings.IndexFunc(s, control) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if control(r) {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	out := b.String()
	if len(out) <= limit {
		return out
	}
	cut := max(limit-24, 0) // room for the note
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d more bytes)", out[:cut], len(out)-cut)
}

// RunReplays performs the replays admins request (veritrail admin replay, the API) until ctx
// ends, asking the store every Config.ReplayPoll. Every evaluator process runs it; the store
// lets one of them apply each message.
func (e *Evaluator) RunReplays(ctx context.Context) error {
	t := time.NewTicker(e.cfg.ReplayPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := e.Replay(ctx); err != nil && ctx.Err() == nil {
			e.d.Log.Error("evaluate: replaying rejected messages failed; will try again", "err", err)
		}
	}
}

// replayBatch bounds the requested replays read at a time.
const replayBatch = 100

// Replay performs the requested replays, oldest rejection first, and answers how many it
// applied. A message that fails for good again is rejected again with the new reason; one that
// fails for the moment stays requested, for the next call.
func (e *Evaluator) Replay(ctx context.Context) (int, error) {
	reqs, _, err := e.d.Store.ListRejected(ctx, store.RejectedFilter{State: store.StateReplayRequested, OldestFirst: true,
		Page: store.Page{Page: 1, PerPage: replayBatch}})
	if err != nil {
		return 0, fmt.Errorf("evaluate: list requested replays: %w", err)
	}
	applied := 0
	for _, r := range reqs {
		ok, err := e.replay(ctx, r)
		if err != nil {
			return applied, err
		}
		if ok {
			applied++
		}
	}
	return applied, nil
}

// replay applies one rejected message through the same code as Handle, in a transaction that
// also turns its replay request into a replay (store.Tx.ClaimReplay): the message was marked
// applied when it was rejected, without any effect, and the claim makes the replay happen
// once, however often it is requested and however many evaluators try.
func (e *Evaluator) replay(ctx context.Context, r store.RejectedMessage) (bool, error) {
	env, err := contract.Unmarshal(r.Payload)
	if err != nil {
		return false, e.rejectAgain(ctx, r, fmt.Errorf("%w: %w", ErrPermanent, err), store.ClassPermanent)
	}
	var trailID string
	claimed := false
	class, err := e.attempt(ctx, func() error {
		return e.d.Store.Update(ctx, func(tx store.Tx) error {
			var err error
			claimed, err = tx.ClaimReplay(ctx, r.ID, e.now())
			if err != nil || !claimed {
				return err
			}
			trailID, err = e.applyEffects(ctx, tx, env)
			return err
		})
	})
	switch {
	case err == nil && claimed:
		e.d.Log.Info("evaluate: rejected message replayed", "org", r.OrgID, "id", r.ID, "kind", r.Kind)
		e.afterApply(env, trailID, trace.SpanContext{}) // a replay continues no report's trace
		return true, nil
	case err == nil:
		return false, nil // replayed by another evaluator meanwhile
	case class == store.ClassTransient:
		return false, fmt.Errorf("evaluate: replay %s %s: %w", r.Kind, r.ID, err)
	}
	return false, e.rejectAgain(ctx, r, err, class)
}

func (e *Evaluator) rejectAgain(ctx context.Context, r store.RejectedMessage, cause error, class store.ErrorClass) error {
	reason := clean(cause.Error(), maxReason)
	err := e.d.Store.Update(ctx, func(tx store.Tx) error { return tx.RejectAgain(ctx, r.ID, reason, class, e.now()) })
	if err != nil {
		return fmt.Errorf("evaluate: record the failed replay of %s: %w", r.ID, err)
	}
	e.d.Log.Error("evaluate: replayed message rejected again; it stays a dead letter",
		"org", r.OrgID, "id", r.ID, "kind", r.Kind, "class", class, "reason", reason)
	return nil
}
