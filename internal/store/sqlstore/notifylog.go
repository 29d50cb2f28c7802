package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

// The notify tier's delivery log (deliverylog.Log) and its outcomes (deliverylog.Outcomes). Times are
// kept as Unix nanoseconds so that they compare exactly; 0 is "never".

var (
	_ deliverylog.Log      = (*Store)(nil)
	_ deliverylog.Outcomes = (*Store)(nil)
)

// States of a delivery row.
const (
	deliveryClaimed   = 0
	deliveryDelivered = 1
	deliveryFailed    = 2
)

const deliveryKey = `org = ? AND rule = ? AND target = ? AND event = ?`

func deliveryKeyArgs(k deliverylog.Key) []any { return []any{k.Org, k.Rule, k.Target, k.Event} }

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// logTx runs fn as one transaction of the log.
func (s *Store) logTx(ctx context.Context, fn func(t *txn) error) error {
	return s.Update(ctx, func(tx store.Tx) error { return fn(tx.(*txn)) })
}

// Claim implements deliverylog.Log: insert the delivery, or take over an expired claim, or report
// how it stands. Under concurrent claims the insert (or the conditional update) succeeds for
// exactly one of them; PostgreSQL makes the others wait for its commit and then see it.
func (s *Store) Claim(ctx context.Context, e deliverylog.Entry, now time.Time, lease time.Duration) (deliverylog.ClaimState, error) {
	payload, err := json.Marshal(e.Payload)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: claim %s: encode payload: %w", e.Key, err)
	}
	until := now.Add(lease).UnixNano()
	var state deliverylog.ClaimState
	err = s.logTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, "claim delivery", `INSERT INTO notify_deliveries (org, rule, target, event, notifier, payload,
			state, lease_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (org, rule, target, event) DO NOTHING`,
			append(deliveryKeyArgs(e.Key), e.Notifier, string(payload), deliveryClaimed, until)...)
		if err != nil || n == 1 {
			state = deliverylog.Claimed
			return err
		}
		n, err = t.exec(ctx, "renew claim", `UPDATE notify_deliveries SET lease_until = ? WHERE `+deliveryKey+`
			AND state = ? AND lease_until <= ?`, append(append([]any{until}, deliveryKeyArgs(e.Key)...), deliveryClaimed, now.UnixNano())...)
		if err != nil || n == 1 {
			state = deliverylog.Claimed
			return err
		}
		var cur int
		if err := t.row(ctx, `SELECT state FROM notify_deliveries WHERE `+deliveryKey, deliveryKeyArgs(e.Key)...).Scan(&cur); err != nil {
			return fmt.Errorf("sqlstore: claim %s: %w", e.Key, err)
		}
		switch cur {
		case deliveryDelivered:
			state = deliverylog.AlreadyDelivered
		case deliveryFailed:
			state = deliverylog.AlreadyFailed
		default:
			state = deliverylog.InFlight
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return state, nil
}

// recordFailureOutcome moves the target's last failure forward to f.At, never back.
func (t *txn) recordFailureOutcome(ctx context.Context, k deliverylog.Key, f deliverylog.Failure) error {
	_, err := t.exec(ctx, "record failure outcome", `INSERT INTO notify_outcomes (org, rule, target, last_failure_at,
		last_failure_reason, last_failure_message) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (org, rule, target) DO UPDATE SET last_failure_at = excluded.last_failure_at,
		last_failure_reason = excluded.last_failure_reason, last_failure_message = excluded.last_failure_message
		WHERE notify_outcomes.last_failure_at < excluded.last_failure_at`,
		k.Org, k.Rule, k.Target, nanos(f.At), f.Reason, f.Message)
	return err
}

// requireDelivery fails with a clear error when the key was never claimed.
func (t *txn) requireDelivery(ctx context.Context, k deliverylog.Key) error {
	var n int
	if err := t.row(ctx, `SELECT COUNT(*) FROM notify_deliveries WHERE `+deliveryKey, deliveryKeyArgs(k)...).Scan(&n); err != nil {
		return fmt.Errorf("sqlstore: delivery %s: %w", k, err)
	}
	if n == 0 {
		return fmt.Errorf("sqlstore: no delivery %s: %w", k, store.ErrNotFound)
	}
	return nil
}

// RecordFailure implements deliverylog.Log.
func (s *Store) RecordFailure(ctx context.Context, key deliverylog.Key, f deliverylog.Failure) error {
	return s.logTx(ctx, func(t *txn) error {
		if err := t.requireDelivery(ctx, key); err != nil {
			return err
		}
		// The pending delivery keeps its latest failure too, for the web UI's list of a rule's
		// deliveries (a settled one stays as it was).
		if _, err := t.exec(ctx, "record failed attempt", `UPDATE notify_deliveries SET attempts = ?, failed_at = ?, retryable = ?,
			reason = ?, message = ? WHERE `+deliveryKey+` AND state = ?`,
			append(append([]any{f.Attempts, nanos(f.At), b2i(f.Retryable), f.Reason, f.Message}, deliveryKeyArgs(key)...),
				deliveryClaimed)...); err != nil {
			return err
		}
		return t.recordFailureOutcome(ctx, key, f)
	})
}

// MarkDelivered implements deliverylog.Log.
func (s *Store) MarkDelivered(ctx context.Context, key deliverylog.Key, at time.Time, attempts int) error {
	return s.logTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, "mark delivered", `UPDATE notify_deliveries SET state = ?, attempts = ?, settled_at = ?
			WHERE `+deliveryKey+` AND state = ?`, append(append([]any{deliveryDelivered, attempts, nanos(at)}, deliveryKeyArgs(key)...),
			deliveryClaimed)...)
		if err != nil {
			return err
		}
		if n == 0 {
			return t.requireDelivery(ctx, key) // settled before: it stays as it was
		}
		_, err = t.exec(ctx, "record success outcome", `INSERT INTO notify_outcomes (org, rule, target, last_success_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (org, rule, target) DO UPDATE SET last_success_at = excluded.last_success_at
			WHERE notify_outcomes.last_success_at < excluded.last_success_at`, key.Org, key.Rule, key.Target, nanos(at))
		return err
	})
}

// MarkFailed implements deliverylog.Log.
func (s *Store) MarkFailed(ctx context.Context, key deliverylog.Key, f deliverylog.Failure) error {
	return s.logTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, "mark failed", `UPDATE notify_deliveries SET state = ?, attempts = ?, settled_at = ?, failed_at = ?,
			retryable = ?, reason = ?, message = ?, exhausted = ? WHERE `+deliveryKey+` AND state = ?`,
			append(append([]any{deliveryFailed, f.Attempts, nanos(f.At), nanos(f.At), b2i(f.Retryable), f.Reason, f.Message,
				b2i(f.Exhausted)}, deliveryKeyArgs(key)...), deliveryClaimed)...)
		if err != nil {
			return err
		}
		if n == 0 {
			return t.requireDelivery(ctx, key)
		}
		return t.recordFailureOutcome(ctx, key, f)
	})
}

const deadLetterCols = `org, rule, target, event, notifier, payload, failed_at, attempts, retryable, reason, message, exhausted`

func (r reads) deadLetters(ctx context.Context, where string, limit int, args ...any) ([]deliverylog.DeadLetter, error) {
	rows, err := r.rows(ctx, `SELECT `+deadLetterCols+` FROM notify_deliveries WHERE state = ? AND `+where+`
		ORDER BY failed_at DESC, rule, target, event LIMIT `+fmt.Sprint(max(limit, 0)), append([]any{deliveryFailed}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: dead letters: %w", err)
	}
	defer rows.Close()
	var out []deliverylog.DeadLetter
	for rows.Next() {
		var d deliverylog.DeadLetter
		var payload string
		var failedAt int64
		var retryable, exhausted int
		if err := rows.Scan(&d.Key.Org, &d.Key.Rule, &d.Key.Target, &d.Key.Event, &d.Notifier, &payload, &failedAt,
			&d.Attempts, &retryable, &d.Reason, &d.Message, &exhausted); err != nil {
			return nil, fmt.Errorf("sqlstore: dead letters: %w", err)
		}
		if err := json.Unmarshal([]byte(payload), &d.Payload); err != nil {
			return nil, fmt.Errorf("sqlstore: dead letter %s: %w", d.Key, err)
		}
		d.At, d.Retryable, d.Exhausted = fromNanos(failedAt), retryable != 0, exhausted != 0
		out = append(out, d)
	}
	return out, rows.Err()
}

// ListDeadLetters implements deliverylog.Log.
func (s *Store) ListDeadLetters(ctx context.Context, org string, limit int) ([]deliverylog.DeadLetter, error) {
	return s.reader().deadLetters(ctx, `org = ?`, limit, org)
}

// RuleDeadLetters lists up to limit dead letters of one rule, most recent failure first: what
// the API shows an organization's admins.
func (s *Store) RuleDeadLetters(ctx context.Context, org string, rule int64, limit int) ([]deliverylog.DeadLetter, error) {
	return s.reader().deadLetters(ctx, `org = ? AND rule = ?`, limit, org, rule)
}

// TargetOutcomes implements deliverylog.Outcomes.
func (s *Store) TargetOutcomes(ctx context.Context, org string, rule int64) ([]deliverylog.TargetOutcome, error) {
	rows, err := s.reader().rows(ctx, `SELECT target, last_success_at, last_failure_at, last_failure_reason, last_failure_message
		FROM notify_outcomes WHERE org = ? AND rule = ? ORDER BY target`, org, rule)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: target outcomes: %w", err)
	}
	defer rows.Close()
	var out []deliverylog.TargetOutcome
	for rows.Next() {
		var o deliverylog.TargetOutcome
		var success, failure int64
		if err := rows.Scan(&o.Target, &success, &failure, &o.LastFailureReason, &o.LastFailureMessage); err != nil {
			return nil, fmt.Errorf("sqlstore: target outcomes: %w", err)
		}
		o.LastSuccessAt, o.LastFailureAt = fromNanos(success), fromNanos(failure)
		out = append(out, o)
	}
	return out, rows.Err()
}

// RuleDeliveries lists a page of one rule's deliveries, the latest first (pending ones, whose
// lease lies ahead, before the settled), with how many there are: what the web UI shows of a
// rule's recent outcomes.
func (s *Store) RuleDeliveries(ctx context.Context, org string, rule int64, p store.Page) ([]deliverylog.Delivery, int, error) {
	r := s.reader()
	var total int
	if err := r.row(ctx, `SELECT COUNT(*) FROM notify_deliveries WHERE org = ? AND rule = ?`, org, rule).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("sqlstore: count deliveries: %w", err)
	}
	rows, err := r.rows(ctx, `SELECT rule, target, event, notifier, payload, state, attempts, settled_at, failed_at, reason, message
		FROM notify_deliveries WHERE org = ? AND rule = ?
		ORDER BY CASE WHEN state = ? THEN lease_until ELSE settled_at END DESC, target, event`+pageClause(p), org, rule, deliveryClaimed)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlstore: deliveries: %w", err)
	}
	defer rows.Close()
	var out []deliverylog.Delivery
	for rows.Next() {
		d := deliverylog.Delivery{Entry: deliverylog.Entry{Key: deliverylog.Key{Org: org}}}
		var payload string
		var state int
		var settled, failed int64
		if err := rows.Scan(&d.Key.Rule, &d.Key.Target, &d.Key.Event, &d.Notifier, &payload, &state, &d.Attempts, &settled, &failed,
			&d.Reason, &d.Message); err != nil {
			return nil, 0, fmt.Errorf("sqlstore: deliveries: %w", err)
		}
		if err := json.Unmarshal([]byte(payload), &d.Payload); err != nil {
			return nil, 0, fmt.Errorf("sqlstore: delivery %s: %w", d.Key, err)
		}
		switch state {
		case deliveryDelivered:
			d.State, d.At = deliverylog.Delivered, fromNanos(settled)
			d.Reason, d.Message = "", "" // an earlier attempt's failure, no longer the outcome
		case deliveryFailed:
			d.State, d.At = deliverylog.GivenUp, fromNanos(settled)
		default:
			d.State, d.At = deliverylog.Pending, fromNanos(failed)
		}
		out = append(out, d)
	}
	return out, total, rows.Err()
}
