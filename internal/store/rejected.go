package store

import "context"

// ErrorClass says whether applying a message again can succeed, as the store's adapter judges
// one of its errors (Store.Classify).
type ErrorClass string

const (
	// ClassTransient errors depend on the moment (a lost connection, a deadlock, a busy
	// database): the message is retried until it applies.
	ClassTransient ErrorClass = "transient"
	// ClassPermanent errors depend on the message (a constraint, an encoding the database
	// refuses, a record it names that does not exist): retrying cannot help.
	ClassPermanent ErrorClass = "permanent"
	// ClassUnknown errors are neither recognisably; the evaluator retries them a few times.
	ClassUnknown ErrorClass = "unknown"
)

// ReplayState is where a rejected message stands.
type ReplayState string

const (
	// StateRejected: set aside; nothing asked for it since.
	StateRejected ReplayState = "rejected"
	// StateReplayRequested: an admin asked for a replay, which an evaluator performs.
	StateReplayRequested ReplayState = "replay_requested"
	// StateReplayed: a replay applied it. The record is kept.
	StateReplayed ReplayState = "replayed"
)

// RejectedMessage is a dead letter of the evidence topic: a message the evaluator could never
// apply, set aside so that the messages behind it go on, with what it needs to be replayed.
type RejectedMessage struct {
	// Seq orders rejections; the store assigns it.
	Seq int64
	// ID is the message's ID (its idempotency key), under which it is marked applied.
	ID string
	// OrgID is "" for a message that could not be decoded and named no organization.
	OrgID        string
	Kind         string
	PartitionKey string
	// Payload is the message as it came from the bus.
	Payload []byte
	// Reason is the error of the last attempt, Class its class (permanent or unknown).
	Reason     string
	Class      ErrorClass
	RejectedAt float64 // of the last rejection
	State      ReplayState
	// RequestedAt is when a replay was last requested, ReplayedAt when one applied (0 = never).
	RequestedAt float64
	ReplayedAt  float64
}

// RejectedFilter narrows ListRejected.
type RejectedFilter struct {
	OrgID string      // "" = every organization (the admin command)
	State ReplayState // "" = any
	// OldestFirst lists in the order of rejection instead of newest first.
	OldestFirst bool
	Page
}

// RejectedReader reads rejected messages.
type RejectedReader interface {
	// ListRejected lists rejected messages, newest first unless f.OldestFirst, with the total.
	ListRejected(ctx context.Context, f RejectedFilter) ([]RejectedMessage, int, error)
	// RejectedMessage is one rejected message of orgID ("" = of any organization).
	RejectedMessage(ctx context.Context, orgID, id string) (RejectedMessage, error)
}

// RejectedWriter is the evaluator's side of rejected messages.
type RejectedWriter interface {
	// InsertRejected records a rejected message (in the transaction that marks it applied); a
	// second record with the same ID changes nothing.
	InsertRejected(ctx context.Context, r RejectedMessage) error
	// ClaimReplay turns a requested replay of id into a replay, marks the message's audit record
	// applied, and answers true; it answers false and changes nothing when no replay of id is
	// requested (another evaluator did it, or nobody asked). On PostgreSQL it holds the row until
	// the transaction ends, so of evaluators replaying one message at once, one applies it.
	ClaimReplay(ctx context.Context, id string, at float64) (bool, error)
	// RejectAgain records that a requested replay of id failed for good: the message is
	// rejected again, with the new reason. A message no longer waiting for a replay is left alone.
	RejectAgain(ctx context.Context, id, reason string, class ErrorClass, at float64) error
}

// ReplayRequester asks for replays of rejected messages; the evaluator performs them.
type ReplayRequester interface {
	// RequestReplay asks for the replay of the rejected message id of orgID ("" = of any
	// organization) and answers it as it is then. A message replayed already is left as it is,
	// so asking twice never applies a message twice. ErrNotFound when there is no such message.
	RequestReplay(ctx context.Context, orgID, id string, at float64) (RejectedMessage, error)
	// RequestReplays asks for the replay of every rejected message of orgID ("" = of every
	// organization) not replayed yet, and answers how many it asked for.
	RequestReplays(ctx context.Context, orgID string, at float64) (int, error)
}
