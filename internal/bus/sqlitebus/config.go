package sqlitebus

import (
	"fmt"
	"time"
)

// Synchronous is the value of SQLite's PRAGMA synchronous used by Open.
type Synchronous string

const (
	// SynchronousNormal is the default; see Open for why it is enough.
	SynchronousNormal Synchronous = "NORMAL"
	// SynchronousFull also fsyncs the WAL on every commit, which adds
	// durability against power loss and OS crashes at the cost of one fsync
	// per Publish.
	SynchronousFull Synchronous = "FULL"
)

// Defaults used when a duration field is left zero.
const (
	DefaultBusyTimeout     = 5 * time.Second
	DefaultPollInterval    = 100 * time.Millisecond
	DefaultNackResendSleep = time.Second
	DefaultLeaseDuration   = 15 * time.Second
	DefaultRetention       = 7 * 24 * time.Hour
	DefaultCompactInterval = time.Hour
	DefaultMaxLagWait      = 250 * time.Millisecond
)

// Config configures a Bus and, through OpenWith, the database connection.
type Config struct {
	// Synchronous is the PRAGMA synchronous that OpenWith sets on every
	// connection: SynchronousNormal (default) or SynchronousFull.
	Synchronous Synchronous
	// BusyTimeout is how long a connection waits for another process's write
	// lock before failing with SQLITE_BUSY (OpenWith; default 5s).
	BusyTimeout time.Duration

	// PollInterval, NackResendSleep, LeaseDuration and MaxInFlight are
	// passed to the subscribers the Bus creates; see SubscriberConfig.
	PollInterval    time.Duration
	NackResendSleep time.Duration
	LeaseDuration   time.Duration
	MaxInFlight     int

	// Retention is the minimum age of a message before Compact may delete it
	// (default 7 days).
	Retention time.Duration
	// PublishLinger is PublisherConfig.Linger of the Bus's publishers
	// (zero: DefaultLinger, or DefaultJournalLinger with PublishJournal).
	PublishLinger time.Duration
	// PublishJournal makes Publish append to a journal file beside the
	// database ("<database>-publog") and return, while a goroutine of the
	// Bus moves the journal into the messages table in large transactions
	// (see journal.go). Same guarantee, a fraction of the cost on the
	// publisher's path. It applies to every publisher on the Bus's Hub. If
	// another process holds the journal, this Bus publishes to the table
	// directly.
	PublishJournal bool
	// MoveLinger, when positive, is how long the journal's mover lets
	// appends gather before every move, instead of its own choice (2 ms, or
	// 25 ms under load; see mover.go). Bus.Hurry ends it either way.
	MoveLinger time.Duration

	// MaxLag, with LagGroup, bounds how far that consumer group, while
	// subscribed to a topic in this process, may fall behind this Bus's
	// publishers: a Publish to the topic waits while more than MaxLag of
	// the messages published through this Bus are unacked by the group,
	// for up to MaxLagWait (default DefaultMaxLagWait), then goes ahead.
	// Zero: no bound. See lag.go for why the embedded mode wants it.
	MaxLag     int
	LagGroup   string
	MaxLagWait time.Duration

	// CompactInterval is how often the Bus runs Compact in the background
	// (default 1h). A negative value disables the background compaction;
	// Compact can still be called directly.
	CompactInterval time.Duration

	// CheckpointInterval is how often the Bus checkpoints the write-ahead log
	// from a goroutine of its own, so that publishes do not wait for
	// checkpoints inside their commits (default walcheckpoint.DefaultInterval;
	// negative: only SQLite's own wal_autocheckpoint, as set by Open).
	CheckpointInterval time.Duration
}

func (c Config) withDefaults() (Config, error) {
	switch c.Synchronous {
	case "":
		c.Synchronous = SynchronousNormal
	case SynchronousNormal, SynchronousFull:
	default:
		return c, fmt.Errorf("sqlitebus: unsupported synchronous mode %q (want %q or %q)", c.Synchronous, SynchronousNormal, SynchronousFull)
	}
	if c.BusyTimeout <= 0 {
		c.BusyTimeout = DefaultBusyTimeout
	}
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	if c.CompactInterval == 0 {
		c.CompactInterval = DefaultCompactInterval
	}
	if c.MaxLagWait <= 0 {
		c.MaxLagWait = DefaultMaxLagWait
	}
	if c.MaxLag < 0 || (c.MaxLag > 0 && c.LagGroup == "") {
		return c, fmt.Errorf("sqlitebus: MaxLag %d needs a LagGroup and may not be negative", c.MaxLag)
	}
	return c, nil
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Hub lets the publisher wake subscribers of the same database in this
	// process and share their write lock. Nil means a private Hub: messages
	// are still delivered, but in-process subscribers only see them on their
	// next poll.
	Hub *Hub
	// Linger is the longest a commit waits for more Publish calls to share
	// it, when calls arrive faster than one per Linger on average (see
	// commitPublish). Zero means DefaultLinger, or DefaultJournalLinger when
	// the Hub's Bus publishes through its journal; negative, never wait.
	Linger time.Duration
}

// DefaultLinger is PublisherConfig.Linger's default. A commit of the
// embedded bus took about 110 us whatever it held, and ingest's calls came
// about 180 us apart under load (5,600 a second): groups held 1.1 calls on
// average. Waiting up to 200 us for more raised ingest's 201 rate alone to
// 7,500-9,000 a second (docs/PERFORMANCE.md).
const DefaultLinger = 200 * time.Microsecond

// DefaultJournalLinger is the linger of publishers that append to a Bus's
// journal (Config.PublishJournal) when none is configured. An
// append costs a fraction of a commit, and 200 us of it left a tenth of the
// cores idle at 16 clients; 50 us kept 1.5 calls an append and the cores busy
// (docs/PERFORMANCE.md).
const DefaultJournalLinger = 50 * time.Microsecond

// lingerGroup is the group size at which a lingering commit stops waiting.
const lingerGroup = 16

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// ConsumerGroup names the group whose acked offsets are stored in the
	// database. Empty means an independent, in-memory consumer that starts at
	// the oldest retained message of the topic on every Subscribe.
	ConsumerGroup string
	// PollInterval is how often the database is checked for messages that no
	// in-process publisher announced, e.g. ones written by another process,
	// or for a lease held by another process to be released (default 100ms).
	PollInterval time.Duration
	// NackResendSleep is the wait before a nacked message is delivered again
	// (default 1s; negative means no wait).
	NackResendSleep time.Duration
	// LeaseDuration bounds how long a consumer group's in-flight message stays
	// claimed by a subscriber that stopped renewing it (a crashed process).
	// The lease is renewed every LeaseDuration/3 while a message waits for its
	// Ack, so it limits the takeover delay after a crash, not processing time
	// (default 15s).
	LeaseDuration time.Duration
	// MaxInFlight is how many messages of a consumer group a subscription
	// delivers before the first of them is acked (default 1, at most
	// MaxWindow): it claims that many and claims the next ones when all are
	// acked. Above 1, the consumer must read the channel from one
	// goroutine and ack in order, as a batching consumer does: the group's
	// offset advances over the acked prefix, and a nack delivers the nacked
	// message and every one after it again. Independent subscribers always
	// deliver one at a time.
	MaxInFlight int
	// Hub: see PublisherConfig.Hub.
	Hub *Hub
}

func (c SubscriberConfig) withDefaults() SubscriberConfig {
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.NackResendSleep == 0 {
		c.NackResendSleep = DefaultNackResendSleep
	} else if c.NackResendSleep < 0 {
		c.NackResendSleep = 0
	}
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	c.MaxInFlight = min(max(c.MaxInFlight, 1), MaxWindow)
	if c.Hub == nil {
		c.Hub = NewHub()
	}
	return c
}
