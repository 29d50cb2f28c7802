package sqlitebus

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/veritrail/veritrail/internal/walcheckpoint"
)

// Bus ties one database to one Hub, so that the publishers and subscribers it
// creates wake each other within the process, and runs the retention
// compaction. It is the usual entry point:
//
//	db, err := sqlitebus.Open(path)
//	bus, err := sqlitebus.New(db, sqlitebus.Config{}, logger)
//	pub, err := bus.Publisher()
//	sub, err := bus.Subscriber("evaluate")
type Bus struct {
	db     *sql.DB
	cfg    Config
	hub    *Hub
	st     *dbState
	logger watermill.LoggerAdapter

	mu      sync.Mutex
	closed  bool
	nextID  int
	closers map[int]func() error

	stopCompact chan struct{}
	compactDone chan struct{}
	ckpt        *walcheckpoint.Checkpointer // nil when disabled

	// The publish journal and its mover, when Config.PublishJournal holds.
	jr        *journal
	stopMove  chan struct{}
	moverDone chan struct{}
}

// New migrates the schema if needed and starts the background checkpoints and
// compaction unless their intervals are negative. The caller keeps ownership of db:
// close it after Bus.Close.
func New(db *sql.DB, cfg Config, logger watermill.LoggerAdapter) (*Bus, error) {
	if db == nil {
		return nil, errors.New("sqlitebus: new bus: nil db")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	hub := NewHub()
	st, err := hub.state(db)
	if err != nil {
		return nil, err
	}
	b := &Bus{
		db:          db,
		cfg:         cfg,
		hub:         hub,
		st:          st,
		logger:      logger,
		closers:     make(map[int]func() error),
		stopCompact: make(chan struct{}),
		compactDone: make(chan struct{}),
	}
	if err := b.st.ready(); err != nil {
		return nil, err
	}
	if cfg.MaxLag > 0 {
		// Taken before the journal's recovered messages are moved: those count.
		var last int64
		if err := db.QueryRowContext(context.Background(),
			`SELECT COALESCE(MAX("offset"), 0) FROM sqlitebus_messages`).Scan(&last); err != nil {
			return nil, fmt.Errorf("sqlitebus: read the last offset: %w", err)
		}
		b.st.lag = newLagGate(cfg.LagGroup, cfg.MaxLag, cfg.MaxLagWait, last)
	}
	if cfg.PublishJournal {
		if err := b.openJournal(); err != nil {
			return nil, err
		}
	}
	if cfg.CheckpointInterval >= 0 {
		b.ckpt = walcheckpoint.Start(db, cfg.CheckpointInterval, func(err error) {
			// SQLite's wal_autocheckpoint still runs in the commits; this only says why the
			// publishes may have become slower.
			logger.Error("sqlitebus: background checkpoint failed", err, nil)
		})
	}
	if cfg.CompactInterval > 0 {
		go b.compactLoop()
	} else {
		close(b.compactDone)
	}
	return b, nil
}

// Ping reports whether the bus takes publishes: it is open, its journal (if any) is usable,
// and its database takes the write lock, which moving the journal and every claim and ack
// need. Taking the lock waits up to the database's busy timeout, which ctx does not shorten
// (SQLite's busy wait is not interruptible); the caller bounds its own wait.
func (b *Bus) Ping(ctx context.Context) error {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if b.jr != nil {
		if err := b.jr.usable(); err != nil {
			return fmt.Errorf("sqlitebus: %w", err)
		}
	}
	if err := b.st.probeWrite(ctx); err != nil {
		return fmt.Errorf("sqlitebus: the database takes no writes: %w", err)
	}
	return nil
}

// Hub returns the Hub shared by everything the Bus creates, for publishers or
// subscribers built with NewPublisher/NewSubscriber on the same *sql.DB.
func (b *Bus) Hub() *Hub { return b.hub }

// PublishStats counts the group commits of this process's publishers on the
// bus's database (see commitPublish).
type PublishStats struct {
	Commits int64 // transactions
	Calls   int64 // Publish calls they held
}

// Hurry has the journal's mover move what it holds now instead of at the end of its linger,
// which under load lets publishes gather for up to 25 ms: someone waits for them (a read after
// write). It never blocks, and a Bus without a journal ignores it. A Hurry with nothing to move
// shortens the next linger only.
func (b *Bus) Hurry() {
	if b.jr == nil {
		return
	}
	select {
	case b.jr.hurry <- struct{}{}:
	default:
	}
}

// PublishStats returns the counts so far.
func (b *Bus) PublishStats() PublishStats {
	return PublishStats{Commits: b.st.pubCommits.Load(), Calls: b.st.pubCalls.Load()}
}

// Publisher returns a new Publisher on the bus's database.
func (b *Bus) Publisher() (*Publisher, error) {
	p, err := NewPublisher(b.db, PublisherConfig{Hub: b.hub, Linger: b.cfg.PublishLinger}, b.logger)
	if err != nil {
		return nil, err
	}
	if err := b.track(p.Close, func(f func()) { p.onClose = f }); err != nil {
		return nil, err
	}
	return p, nil
}

// Subscriber returns a new Subscriber of consumerGroup (empty: independent
// consumer) with the bus's PollInterval, NackResendSleep and LeaseDuration.
func (b *Bus) Subscriber(consumerGroup string) (*Subscriber, error) {
	s, err := NewSubscriber(b.db, SubscriberConfig{
		ConsumerGroup:   consumerGroup,
		PollInterval:    b.cfg.PollInterval,
		NackResendSleep: b.cfg.NackResendSleep,
		LeaseDuration:   b.cfg.LeaseDuration,
		MaxInFlight:     b.cfg.MaxInFlight,
		Hub:             b.hub,
	}, b.logger)
	if err != nil {
		return nil, err
	}
	if err := b.track(s.Close, func(f func()) { s.onClose = f }); err != nil {
		return nil, err
	}
	return s, nil
}

// track remembers closeFn for Bus.Close; setOnClose installs the callback
// that forgets it again when the publisher or subscriber is closed first.
func (b *Bus) track(closeFn func() error, setOnClose func(func())) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		_ = closeFn()
		return ErrClosed
	}
	id := b.nextID
	b.nextID++
	b.closers[id] = closeFn
	setOnClose(func() {
		b.mu.Lock()
		delete(b.closers, id)
		b.mu.Unlock()
	})
	return nil
}

// Close stops the background work and closes every publisher and
// subscriber created by the bus. It does not close the *sql.DB. It is
// idempotent.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		<-b.compactDone
		return nil
	}
	b.closed = true
	closers := make([]func() error, 0, len(b.closers))
	for _, c := range b.closers {
		closers = append(closers, c)
	}
	close(b.stopCompact)
	b.mu.Unlock()
	if b.jr != nil {
		// Publishes waiting for the mover to make room fail now rather than hold Close.
		b.jr.close()
	}

	var errs []error
	for _, c := range closers {
		errs = append(errs, c())
	}
	<-b.compactDone
	if b.jr != nil {
		// The publishers are closed: move what they appended, then let the file go.
		close(b.stopMove)
		<-b.moverDone
		errs = append(errs, b.jr.release())
	}
	if b.ckpt != nil {
		b.ckpt.Stop()
	}
	return errors.Join(errs...)
}

// openJournal opens the database's publish journal, queues what it holds
// beyond the table for the mover, and starts the mover.
func (b *Bus) openJournal() error {
	if b.st.path == "" {
		return errors.New("sqlitebus: the publish journal needs a database file")
	}
	pos, err := b.st.readJournalPosition()
	if err != nil {
		return err
	}
	path := b.st.path + journalSuffix
	jr, err := openJournal(path, pos, b.cfg.Synchronous == SynchronousFull, b.logger)
	if errors.Is(err, errJournalLocked) {
		b.logger.Info("sqlitebus: another process holds the publish journal; publishing to the table directly",
			watermill.LogFields{"path": path})
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlitebus: %w", err)
	}
	if b.st.lag != nil {
		for topic, n := range jr.pendingMessages() {
			b.st.lag.admit(topic, n) // nobody is subscribed yet: counts without waiting
		}
	}
	b.jr, b.st.jr = jr, jr
	b.stopMove, b.moverDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(b.moverDone)
		b.st.moveLoop(jr, b.cfg.MoveLinger, b.stopMove, b.logger)
	}()
	return nil
}

func (b *Bus) compactLoop() {
	defer close(b.compactDone)
	t := time.NewTicker(b.cfg.CompactInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stopCompact:
			return
		case <-t.C:
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				// Close must not wait for a long compaction to finish.
				select {
				case <-b.stopCompact:
					cancel()
				case <-ctx.Done():
				}
			}()
			n, err := b.Compact(ctx)
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				b.logger.Error("sqlitebus: compaction failed", err, nil)
			} else if n > 0 {
				b.logger.Info("sqlitebus: compacted messages", watermill.LogFields{"deleted": n})
			}
		}
	}
}

// compactBatch bounds how long one DELETE holds the write lock, so
// publishers are delayed by one short batch at most.
const compactBatch = 1000

// Compact deletes the messages older than Config.Retention that every known
// consumer group of their topic has acked, and returns how many it deleted.
// A group is known for a topic once it has subscribed to it (or called
// SubscribeInitialize); topics no group has subscribed to lose their old
// messages unconditionally. Independent consumers never hold messages back:
// they read whatever is still retained.
func (b *Bus) Compact(ctx context.Context) (int64, error) {
	cutoff := time.Now().Add(-b.cfg.Retention).UnixNano()
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("sqlitebus: compact: %w", err)
		}
		res, err := b.st.exec(`DELETE FROM sqlitebus_messages WHERE "offset" IN (
			SELECT m."offset" FROM sqlitebus_messages m
			WHERE m.created_at < ?
			AND m."offset" <= COALESCE(
				(SELECT MIN(o.acked_offset) FROM sqlitebus_offsets o WHERE o.topic = m.topic),
				9223372036854775807)
			LIMIT `+strconv.Itoa(compactBatch)+`)`, cutoff)
		if err != nil {
			return total, fmt.Errorf("sqlitebus: compact: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("sqlitebus: compact: %w", err)
		}
		total += n
		if n < compactBatch {
			return total, nil
		}
	}
}

// RemoveConsumerGroup forgets the stored offsets of group on every topic, so
// that an abandoned group no longer holds messages back from Compact. A
// subscriber of the group that is still running starts over from the oldest
// retained message.
func (b *Bus) RemoveConsumerGroup(ctx context.Context, group string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitebus: remove consumer group %q: %w", group, err)
	}
	if _, err := b.st.exec(`DELETE FROM sqlitebus_offsets WHERE consumer_group = ?`, group); err != nil {
		return fmt.Errorf("sqlitebus: remove consumer group %q: %w", group, err)
	}
	return nil
}
