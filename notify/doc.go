// Package notify delivers notifications: when an environment or artifact trigger fires, every
// matching rule's targets get the event at least once, deduplicated, retried with backoff, and
// every outcome recorded truthfully. The notify tier is wired from this package, a Log
// (the store) and the plugin catalog (notify/catalog).
//
// # The pipeline
//
// Route turns an event and the organization's rules into deliveries, one per (rule, target)
// whose rule lists the event's trigger and environment. Each delivery then runs through small
// stages, one file each, assembled in New so the whole path reads top to bottom:
//
//	DedupStage    claim the delivery in the Log; one settled before is a Duplicate and sends
//	              nothing; one claimed by a live worker is ErrInFlight
//	RetryStage    until delivered, permanently failed or out of budget:
//	  SendStage     one attempt through the target's notifier, bounded by AttemptTimeout and
//	                the budget; the notifier classifies the failure (sdk.Failure)
//	  RecordStage   record a failed attempt at once, so the rule reads as failing while retries
//	                go on
//	SettleStage   MarkDelivered (which records the success), or MarkFailed: a dead letter
//
// A Stage returns an error only when the delivery could not be processed (log unreachable,
// process stopping): the delivery stays claimed and unsettled, and the caller offers it again.
// A failure to deliver is not an error; it is data on the Delivery and in the Log.
//
// # Guarantees
//
//   - At least once: a delivery is settled only after the notifier reported success or the
//     delivery was kept as a dead letter. The caller acknowledges the triggering message only
//     when Notify returns nil; a process that dies mid-delivery leaves a claim whose lease
//     (budget + attempt timeout + margin) runs out, and the redelivered message claims it anew.
//   - Deduplicated: the Log is keyed by (organization, rule, target, event). A redelivered or
//     re-routed event finds its deliveries settled and sends nothing. Duplicates remain possible
//     only where at-least-once allows them (a worker dies after the receiver accepted but before
//     MarkDelivered), so every payload carries a DeliveryID, stable across retries, for receivers
//     to drop them.
//   - Retries: on what the notifier classifies retryable (network errors, timeouts, 5xx, 429,
//     SMTP 4xx, a crashed plugin), never on other 4xx. Waits grow exponentially with jitter
//     (cenkalti/backoff) up to MaxBackoff; a receiver's Retry-After is honoured when longer, and a
//     Retry-After beyond the budget ends the delivery at once. The budget counts from the first
//     attempt of a run; a delivery re-claimed after a crash gets a new one.
//   - Outcomes: every failed attempt sets the target's last_failure_at, every delivery its
//     last_success_at, each only forward in time so late writes of older events cannot flip
//     is_failing back. A target is failing while its last failure is newer than its last success;
//     a rule is failing while any of its targets is (Summarize).
//   - Nothing dropped: a permanent failure or an exhausted budget keeps the delivery's entry
//     (payload, notifier, last reason and message, attempts) as a dead letter, listed by
//     ListDeadLetters, and a redelivered event does not resend it.
//
// # The delivery log
//
// Log is defined here, by its consumer, and kept small: Claim, RecordFailure, MarkDelivered,
// MarkFailed and ListDeadLetters, each one transaction; Outcomes is the read side the API needs.
// The store implements both in SQL; memlog is the in-memory implementation for tests and
// logtest the conformance suite every implementation passes.
//
// # Notifiers
//
// Every notifier, built-in or plugin, implements sdk.Notifier and is found by catalog name
// through Notifiers (notify/catalog). Built-ins run in-process (see plugins/builtin for why);
// plugins run as go-plugin processes pinned by SHA-256 and restarted when they crash, the
// interrupted attempt failing as retryable so the retry stage sends it again to the new process.
package notify
