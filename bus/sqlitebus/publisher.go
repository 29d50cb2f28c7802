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
	return &Publisher{st: st, logger: logger}, nil
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
	now := time.Now().UnixNano()

	err := p.insert(topic, msgs, metadata, now)
	if err != nil {
		return fmt.Errorf("sqlitebus: publish %d message(s) to %s: %w", len(msgs), topic, err)
	}
	p.st.notify(topic)
	p.logger.Trace("sqlitebus: published", watermill.LogFields{"topic": topic, "count": len(msgs)})
	return nil
}

// insert runs the one transaction of a Publish. It is a plain deferred
// transaction: its first statement is a write, so SQLite takes the write
// lock right away (waiting for other processes through the busy handler)
// and never has to upgrade a read snapshot.
func (p *Publisher) insert(topic string, msgs []*message.Message, metadata [][]byte, now int64) (err error) {
	p.st.writeMu.Lock()
	defer p.st.writeMu.Unlock()
	// Not cancellable: an interrupted COMMIT would leave the caller unsure
	// whether the messages were stored.
	ctx := context.Background()
	tx, err := p.st.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // err is what matters; SQLite may have rolled back already
		}
	}()
	stmt := tx.StmtContext(ctx, p.st.q.insert)
	for i, m := range msgs {
		payload := []byte(m.Payload)
		if payload == nil {
			// The column is NOT NULL; an empty payload round-trips as an
			// empty (non-nil) slice.
			payload = []byte{}
		}
		if _, err := stmt.ExecContext(ctx, topic, m.UUID, payload, string(metadata[i]), now); err != nil {
			return fmt.Errorf("insert %s: %w", m.UUID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
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
