package sqlitebus

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// ErrClosed is returned by Publish and Subscribe after Close.
var ErrClosed = errors.New("sqlitebus: closed")

// Publisher is a message.Publisher that appends to the SQLite database.
type Publisher struct {
	st     *dbState
	logger watermill.LoggerAdapter
	linger time.Duration

	// mu is held for reading by Publish calls in progress, so that Close can
	// wait for them.
	mu      sync.RWMutex
	closed  bool
	onClose func()
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher creates the schema if needed and returns a Publisher.
func NewPublisher(db *sql.DB, cfg PublisherConfig, logger watermill.LoggerAdapter) (*Publisher, error) {
	if db == nil {
		return nil, errors.New("sqlitebus: new publisher: nil db")
	}
	if cfg.Hub == nil {
		cfg.Hub = NewHub()
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	st, err := cfg.Hub.state(db)
	if err != nil {
		return nil, err
	}
	if err := st.ready(); err != nil {
		return nil, err
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
		if st.jr != nil {
			cfg.Linger = DefaultJournalLinger
		}
	}
	return &Publisher{st: st, logger: logger, linger: max(cfg.Linger, 0)}, nil
}

// Publish stores msgs in one transaction and returns after it committed.
// A nil error is the durability point: the messages are on disk (or, with
// synchronous=NORMAL, in the OS page cache; see Open) and will be delivered.
// Either all messages are stored or none.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrClosed
	}
	if topic == "" {
		return errors.New("sqlitebus: publish: empty topic")
	}
	if len(msgs) == 0 {
		return nil
	}

	metadata := make([][]byte, len(msgs))
	for i, m := range msgs {
		md, err := json.Marshal(m.Metadata)
		if err != nil {
			return fmt.Errorf("sqlitebus: publish to %s: marshal metadata of %s: %w", topic, m.UUID, err)
		}
		metadata[i] = md
	}
	if p.st.lag != nil {
		p.st.lag.admit(topic, len(msgs))
	}
	err := p.st.commitPublish(&publishReq{topic: topic, msgs: msgs, metadata: metadata, linger: p.linger, done: make(chan error, 1)})
	if err != nil {
		if p.st.lag != nil {
			p.st.lag.acked(topic, len(msgs))
		}
		return fmt.Errorf("sqlitebus: publish %d message(s) to %s: %w", len(msgs), topic, err)
	}
	p.logger.Trace("sqlitebus: published", watermill.LogFields{"topic": topic, "count": len(msgs)})
	return nil
}

// publishReq is one Publish call waiting for its commit.
type publishReq struct {
	topic    string
	msgs     []*message.Message
	metadata [][]byte
	linger   time.Duration // of its publisher
	done     chan error    // buffered: the committer never blocks on it
}

// commitPublish stores r's messages and returns after they are committed.
// Concurrent calls share transactions (group commit): while one transaction
// commits, the calls that arrive queue up and go into the next one, so a
// burst of publishes costs a few commits instead of one each. The call that
// finds no commit under way leads: it commits the queue, and passes the lead
// to a new goroutine if more calls queued meanwhile, so that no caller waits
// for more than its own group and the one before.
//
// A commit costs about the same whatever it holds, so under a steady load a
// leader first lingers: when calls have been arriving faster than one per
// linger (a moving average of the gaps between them), it waits up to linger
// for more to join, or until lingerGroup have. A call after a quiet spell
// does not wait: one gap eight times the linger lifts the average above it.
func (st *dbState) commitPublish(r *publishReq) error {
	st.pubMu.Lock()
	st.notePublish(time.Now())
	st.pubQueue = append(st.pubQueue, r)
	lead := !st.pubLeading
	st.pubLeading = true
	if st.pubLingering && len(st.pubQueue) >= lingerGroup {
		st.pubLingering = false
		select {
		case st.pubFull <- struct{}{}:
		default:
		}
	}
	st.pubMu.Unlock()
	if lead {
		st.lead(r.linger)
	}
	return <-r.done
}

// notePublish adds a Publish call at now to the moving average of the gaps
// between calls, which the leader's linger and the journal mover's read. The
// caller holds pubMu.
func (st *dbState) notePublish(now time.Time) {
	if !st.pubLast.IsZero() {
		st.pubGap += (now.Sub(st.pubLast) - st.pubGap) / 8
	}
	st.pubLast = now
}

// publishGap is the moving average of the gaps between Publish calls
// (notePublish).
func (st *dbState) publishGap() time.Duration {
	st.pubMu.Lock()
	defer st.pubMu.Unlock()
	return st.pubGap
}

func (st *dbState) lead(linger time.Duration) {
	st.linger(linger)
	st.pubMu.Lock()
	group := st.pubQueue
	st.pubQueue = nil
	st.pubMu.Unlock()

	st.pubCommits.Add(1)
	st.pubCalls.Add(int64(len(group)))
	if st.jr != nil {
		st.jr.append(group, time.Now().UnixNano())
	} else {
		st.insertGroup(group)
	}

	st.pubMu.Lock()
	more := len(st.pubQueue) > 0
	st.pubLeading = more
	st.pubMu.Unlock()
	if more {
		go st.lead(linger)
	}
}

// linger waits for more calls to join the leader's group, when they are
// arriving often enough to be worth it (see commitPublish).
func (st *dbState) linger(d time.Duration) {
	st.pubMu.Lock()
	wait := d > 0 && st.pubGap < d && len(st.pubQueue) < lingerGroup
	st.pubLingering = wait
	st.pubMu.Unlock()
	if !wait {
		return
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-st.pubFull:
	}
	t.Stop()
	st.pubMu.Lock()
	st.pubLingering = false
	st.pubMu.Unlock()
	select { // a wake-up sent as the timer fired must not cut the next linger short
	case <-st.pubFull:
	default:
	}
}

// insertGroup commits the messages of every request of group in one
// transaction and answers each request. If that transaction fails, each
// request is tried in a transaction of its own, so that a request that
// cannot be stored fails alone.
func (st *dbState) insertGroup(group []*publishReq) {
	now := time.Now().UnixNano()
	err := st.insert(group, now)
	if err != nil && len(group) > 1 {
		for _, r := range group {
			r.done <- st.insert([]*publishReq{r}, now)
		}
	} else {
		for _, r := range group {
			r.done <- err
		}
	}
	topics := make(map[string]bool, 1)
	for _, r := range group {
		if !topics[r.topic] {
			topics[r.topic] = true
			st.notify(r.topic)
		}
	}
}

// insert runs one transaction. It is a plain deferred transaction: its first
// statement is a write, so SQLite takes the write lock right away (waiting for
// other processes through the busy handler) and never has to upgrade a read
// snapshot.
func (st *dbState) insert(group []*publishReq, now int64) error {
	return st.insertTx(func(ctx context.Context, tx *sql.Tx, stmt *sql.Stmt) error {
		for _, r := range group {
			for i, m := range r.msgs {
				if err := insertRow(ctx, stmt, r.topic, m.UUID, m.Payload, r.metadata[i], now); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// insertTx runs fill in one transaction under the process write lock, with
// the insert statement prepared on the transaction. Not cancellable: an
// interrupted COMMIT would leave the callers unsure whether the messages
// were stored.
func (st *dbState) insertTx(fill func(ctx context.Context, tx *sql.Tx, insert *sql.Stmt) error) (err error) {
	st.writeMu.Lock()
	defer st.writeMu.Unlock()
	ctx := context.Background()
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // err is what matters; SQLite may have rolled back already
		}
	}()
	if err := fill(ctx, tx, tx.StmtContext(ctx, st.q.insert)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// insertRow inserts one message. The payload column is NOT NULL; an empty
// payload round-trips as an empty (non-nil) slice.
func insertRow(ctx context.Context, insert *sql.Stmt, topic, uuid string, payload, metadata []byte, created int64) error {
	if payload == nil {
		payload = []byte{}
	}
	if _, err := insert.ExecContext(ctx, topic, uuid, payload, string(metadata), created); err != nil {
		return fmt.Errorf("insert %s: %w", uuid, err)
	}
	return nil
}

// Close makes further Publish calls fail and waits for those in progress.
// It does not close the *sql.DB. It is idempotent.
func (p *Publisher) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	onClose := p.onClose
	p.mu.Unlock()
	if !already && onClose != nil {
		onClose()
	}
	return nil
}
