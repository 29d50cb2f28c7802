package sqlitebus

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// independentBatch is how many messages an independent consumer reads per
// query; it owns its position, so reading ahead is safe.
const independentBatch = 128

// MaxWindow bounds SubscriberConfig.MaxInFlight: a window is read with the
// independent consumer's query.
const MaxWindow = independentBatch

// Subscriber is a message.Subscriber reading from the SQLite database. See
// the package documentation for the two kinds (consumer group or
// independent).
type Subscriber struct {
	st     *dbState
	cfg    SubscriberConfig
	logger watermill.LoggerAdapter

	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	wg      sync.WaitGroup
	onClose func()
}

var (
	_ message.Subscriber           = (*Subscriber)(nil)
	_ message.SubscribeInitializer = (*Subscriber)(nil)
)

// NewSubscriber creates the schema if needed and returns a Subscriber.
func NewSubscriber(db *sql.DB, cfg SubscriberConfig, logger watermill.LoggerAdapter) (*Subscriber, error) {
	if db == nil {
		return nil, errors.New("sqlitebus: new subscriber: nil db")
	}
	cfg = cfg.withDefaults()
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
	return &Subscriber{
		st:      st,
		cfg:     cfg,
		logger:  logger.With(watermill.LogFields{"consumer_group": cfg.ConsumerGroup}),
		closing: make(chan struct{}),
	}, nil
}

// SubscribeInitialize registers the consumer group for topic, so that
// Compact keeps the topic's messages until the group has acked them, even
// before its first Subscribe. It does nothing for an independent subscriber.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	if topic == "" {
		return errors.New("sqlitebus: subscribe initialize: empty topic")
	}
	if s.cfg.ConsumerGroup == "" {
		return nil
	}
	return s.ensureOffsetRow(topic)
}

// Subscribe starts delivering the messages of topic on the returned channel,
// one at a time: the next message comes after the previous one was acked (or,
// in a consumer group with MaxInFlight above 1, up to MaxInFlight ahead); a
// nacked message is delivered again after NackResendSleep. The channel is
// closed when ctx is cancelled or the Subscriber is closed; a message that
// was in flight then is delivered again later (at-least-once).
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if topic == "" {
		return nil, errors.New("sqlitebus: subscribe: empty topic")
	}
	if s.isClosed() {
		return nil, ErrClosed
	}
	if s.cfg.ConsumerGroup != "" {
		// Registering the group before returning means messages published
		// after Subscribe returns are never compacted away before the
		// group saw them.
		if err := s.ensureOffsetRow(topic); err != nil {
			return nil, err
		}
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()

	out := make(chan *message.Message)
	wake, unwatch := s.st.watch(topic)
	sub := &subscription{
		s:      s,
		topic:  topic,
		ctx:    ctx,
		out:    out,
		wake:   wake,
		owner:  watermill.NewUUID(),
		logger: s.logger.With(watermill.LogFields{"topic": topic}),
	}
	// Counted before Subscribe returns: a publish right after it is held back already.
	gated := s.st.lag != nil && s.cfg.ConsumerGroup == s.st.lag.group
	if gated {
		s.st.lag.subscribe(topic, 1)
	}
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer unwatch()
		if gated {
			defer s.st.lag.subscribe(topic, -1)
		}
		if s.cfg.ConsumerGroup == "" {
			sub.runIndependent()
		} else {
			sub.runGroup()
		}
	}()
	return out, nil
}

func (s *Subscriber) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops all subscriptions, closes their channels and waits for their
// goroutines. In-flight messages of consumer groups are released so that
// another subscriber can take them at once. It does not close the *sql.DB.
// It is idempotent.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	already := s.closed
	if !already {
		s.closed = true
		close(s.closing)
	}
	onClose := s.onClose
	s.mu.Unlock()
	s.wg.Wait()
	if !already && onClose != nil {
		onClose()
	}
	return nil
}

func (s *Subscriber) ensureOffsetRow(topic string) error {
	var one int
	err := s.st.db.QueryRowContext(context.Background(),
		`SELECT 1 FROM sqlitebus_offsets WHERE consumer_group = ? AND topic = ?`,
		s.cfg.ConsumerGroup, topic).Scan(&one)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlitebus: read offset of group %q on %s: %w", s.cfg.ConsumerGroup, topic, err)
	}
	// A new group starts before the oldest message (offset 0), so it sees
	// everything that is retained, including what was published before it
	// first subscribed.
	_, err = s.st.exec(`INSERT INTO sqlitebus_offsets (consumer_group, topic, acked_offset, updated_at)
		VALUES (?, ?, 0, ?) ON CONFLICT DO NOTHING`,
		s.cfg.ConsumerGroup, topic, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("sqlitebus: register group %q on %s: %w", s.cfg.ConsumerGroup, topic, err)
	}
	return nil
}

// stored is a message as read from the database.
type stored struct {
	offset   int64
	uuid     string
	payload  []byte
	metadata string
}

// subscription is one Subscribe call: a goroutine feeding out.
type subscription struct {
	s      *Subscriber
	topic  string
	ctx    context.Context
	out    chan *message.Message
	wake   <-chan struct{}
	owner  string // lease owner id in sqlitebus_offsets
	logger watermill.LoggerAdapter
}

func (sub *subscription) stopped() bool {
	select {
	case <-sub.ctx.Done():
		return true
	case <-sub.s.closing:
		return true
	default:
		return false
	}
}

// wait blocks until a publisher of this process announces a commit to the
// topic, d elapses, or the subscription stops (false).
func (sub *subscription) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-sub.wake:
		return true
	case <-t.C:
		return true
	case <-sub.ctx.Done():
		return false
	case <-sub.s.closing:
		return false
	}
}

// sleep is wait without the wake-up by publishers.
func (sub *subscription) sleep(d time.Duration) bool {
	if d <= 0 {
		return !sub.stopped()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-sub.ctx.Done():
		return false
	case <-sub.s.closing:
		return false
	}
}

// fetch reads up to independentBatch messages after the given offset.
func (sub *subscription) fetch(after int64) ([]stored, error) {
	rows, err := sub.s.st.q.fetch.QueryContext(context.Background(), sub.topic, after)
	if err != nil {
		return nil, fmt.Errorf("sqlitebus: read %s after offset %d: %w", sub.topic, after, err)
	}
	defer rows.Close()
	var msgs []stored
	for rows.Next() {
		var m stored
		if err := rows.Scan(&m.offset, &m.uuid, &m.payload, &m.metadata); err != nil {
			return nil, fmt.Errorf("sqlitebus: read %s after offset %d: %w", sub.topic, after, err)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitebus: read %s after offset %d: %w", sub.topic, after, err)
	}
	return msgs, nil
}

func (sub *subscription) runIndependent() {
	var pos int64
	var buf []stored
	for !sub.stopped() {
		if len(buf) == 0 {
			var err error
			buf, err = sub.fetch(pos)
			if err != nil {
				sub.logger.Error("sqlitebus: cannot read messages", err, nil)
				if !sub.sleep(sub.s.cfg.PollInterval) {
					return
				}
				continue
			}
			if len(buf) == 0 {
				if !sub.wait(sub.s.cfg.PollInterval) {
					return
				}
				continue
			}
		}
		if !sub.deliver(buf[0]) {
			return
		}
		pos = buf[0].offset
		buf = buf[1:]
	}
}

func (sub *subscription) runGroup() {
	slot := sub.s.st.slot(sub.s.cfg.ConsumerGroup, sub.topic)
	for {
		select {
		case slot <- struct{}{}:
		case <-sub.ctx.Done():
			return
		case <-sub.s.closing:
			return
		}
		window, err := sub.claim()
		if err != nil || len(window) == 0 {
			<-slot
			if err != nil {
				sub.logger.Error("sqlitebus: cannot claim next message", err, nil)
			}
			// Nothing to deliver, or the message is leased by another
			// process: wait for a local publish or the next poll.
			if !sub.wait(sub.s.cfg.PollInterval) {
				return
			}
			continue
		}
		ok := sub.deliverWindow(window)
		<-slot
		if !ok {
			return
		}
	}
}

// claim leases the group's next messages (up to MaxInFlight) to this
// subscription. It returns none when there is no message, or when another
// subscriber (of another process or Hub) holds an unexpired lease.
func (sub *subscription) claim() ([]stored, error) {
	group := sub.s.cfg.ConsumerGroup
	var (
		acked    int64
		owner    sql.NullString
		until    sql.NullInt64
		offset   sql.NullInt64
		m        stored
		metadata sql.NullString
		uuid     sql.NullString // NULL when the group has consumed everything
	)
	err := sub.s.st.q.next.QueryRowContext(context.Background(), group, sub.topic).
		Scan(&acked, &owner, &until, &offset, &uuid, &m.payload, &metadata)
	if errors.Is(err, sql.ErrNoRows) {
		// Only RemoveConsumerGroup deletes rows; start the group again.
		return nil, sub.s.ensureOffsetRow(sub.topic)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitebus: read next message of %s: %w", sub.topic, err)
	}
	now := time.Now().UnixNano()
	if !offset.Valid || (owner.Valid && owner.String != sub.owner && until.Int64 > now) {
		return nil, nil
	}
	m.offset, m.metadata, m.uuid = offset.Int64, metadata.String, uuid.String
	// Messages are immutable, so if the CAS holds, m and the ones after it
	// are still the next ones: the lease covers the group's whole stream.
	res, err := sub.s.st.execStmt(sub.s.st.q.claim,
		sub.owner, now+int64(sub.s.cfg.LeaseDuration), now, group, sub.topic, acked)
	if err != nil {
		return nil, fmt.Errorf("sqlitebus: lease offset %d of %s: %w", m.offset, sub.topic, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return nil, err
	}
	window := []stored{m}
	if sub.s.cfg.MaxInFlight > 1 {
		more, err := sub.fetch(m.offset)
		if err != nil {
			sub.release()
			return nil, err
		}
		window = append(window, more[:min(len(more), sub.s.cfg.MaxInFlight-1)]...)
	}
	return window, nil
}

// deliverWindow sends the leased messages in order, each without waiting for
// the ack of the one before, and stores the ack of the acked prefix once
// every message is acked or one is nacked (then, after NackResendSleep, the
// caller claims again from the nacked one). It returns false when the
// subscription stopped.
func (sub *subscription) deliverWindow(window []stored) bool {
	msgs := make([]*message.Message, len(window))
	cancels := make([]context.CancelFunc, len(window))
	cancelAll := func() {
		for _, cancel := range cancels {
			if cancel != nil {
				cancel()
			}
		}
	}
	defer cancelAll()
	renew := time.NewTicker(max(sub.s.cfg.LeaseDuration/3, time.Millisecond))
	defer renew.Stop()

	sent, acked := 0, 0
	nacked, stopped := false, false
	for acked < len(window) && !nacked && !stopped {
		var out chan<- *message.Message
		var next *message.Message
		if sent < len(window) {
			if msgs[sent] == nil {
				msgs[sent], cancels[sent] = sub.message(window[sent])
			}
			out, next = sub.out, msgs[sent]
		}
		var ack, nack <-chan struct{}
		if acked < sent {
			ack, nack = msgs[acked].Acked(), msgs[acked].Nacked()
		}
		select {
		case out <- next:
			sent++
		case <-ack:
			cancels[acked]()
			acked++
		case <-nack:
			nacked = true
		case <-renew.C:
			sub.renewLease()
		case <-sub.ctx.Done():
			stopped = true
		case <-sub.s.closing:
			stopped = true
		}
	}
	if stopped { // keep the acks that raced with the stop
		for acked < sent && isClosed(msgs[acked].Acked()) {
			acked++
		}
	}
	cancelAll()    // before the nack's sleep: the handlers of the rest are over
	if acked > 0 { // storing the ack drops the lease too
		if !sub.commitAck(window[acked-1].offset) {
			return false
		}
		if g := sub.s.st.lag; g != nil && sub.s.cfg.ConsumerGroup == g.group {
			g.ackedWindow(sub.topic, window[:acked])
		}
	} else {
		sub.release()
	}
	if stopped {
		return false
	}
	if nacked {
		return sub.sleep(sub.s.cfg.NackResendSleep)
	}
	return true
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// message makes the watermill message of m. A fresh copy per delivery: a
// handler that changed the payload must not alter what a redelivery carries.
func (sub *subscription) message(m stored) (*message.Message, context.CancelFunc) {
	msg := message.NewMessage(m.uuid, bytes.Clone(m.payload))
	md, err := decodeMetadata([]byte(m.metadata))
	if err != nil {
		// Delivering without metadata beats blocking the topic forever on a
		// message that can never be decoded.
		sub.logger.Error("sqlitebus: cannot decode metadata", err, watermill.LogFields{"uuid": m.uuid, "offset": m.offset})
	}
	msg.Metadata = md
	ctx, cancel := context.WithCancel(sub.ctx)
	msg.SetContext(ctx)
	return msg, cancel
}

// deliver sends m, an independent subscriber's message, until it is acked
// (true) or the subscription stops (false).
func (sub *subscription) deliver(m stored) bool {
	for {
		msg, cancel := sub.message(m)
		select {
		case sub.out <- msg:
		case <-sub.ctx.Done():
			cancel()
			return false
		case <-sub.s.closing:
			cancel()
			return false
		}
		acked, ok := sub.awaitAck(msg)
		cancel()
		if !ok {
			return false
		}
		if acked {
			return true
		}
		if !sub.sleep(sub.s.cfg.NackResendSleep) {
			return false
		}
	}
}

// awaitAck returns acked=true on Ack, false on Nack, and ok=false if the
// subscription stopped first (unless the Ack raced with the stop, which
// saves a redelivery).
func (sub *subscription) awaitAck(msg *message.Message) (acked, ok bool) {
	select {
	case <-msg.Acked():
		return true, true
	case <-msg.Nacked():
		return false, true
	case <-sub.ctx.Done():
	case <-sub.s.closing:
	}
	if isClosed(msg.Acked()) {
		return true, true
	}
	return false, false
}

// commitAck stores the group's new offset and drops the lease, retrying
// database errors until it succeeds or the subscription stops (false; the
// message will then be delivered again).
func (sub *subscription) commitAck(offset int64) bool {
	for {
		res, err := sub.s.st.execStmt(sub.s.st.q.ack, offset, time.Now().UnixNano(), sub.s.cfg.ConsumerGroup, sub.topic, sub.owner)
		if err == nil {
			if n, err := res.RowsAffected(); err == nil && n == 0 {
				sub.logger.Error("sqlitebus: lease was lost before the ack was stored; the message may be processed twice",
					nil, watermill.LogFields{"offset": offset})
			}
			return true
		}
		sub.logger.Error("sqlitebus: cannot store ack", err, watermill.LogFields{"offset": offset})
		if !sub.sleep(sub.s.cfg.PollInterval) {
			return false
		}
	}
}

func (sub *subscription) renewLease() {
	now := time.Now()
	res, err := sub.s.st.execStmt(sub.s.st.q.renew, now.Add(sub.s.cfg.LeaseDuration).UnixNano(), now.UnixNano(),
		sub.s.cfg.ConsumerGroup, sub.topic, sub.owner)
	if err != nil {
		sub.logger.Error("sqlitebus: cannot renew lease", err, nil)
		return
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		sub.logger.Error("sqlitebus: lease was taken over while the message was in flight", nil, nil)
	}
}

// release gives up the lease of unacked messages so that another
// subscriber of the group can take them now instead of after LeaseDuration.
func (sub *subscription) release() {
	_, err := sub.s.st.execStmt(sub.s.st.q.release, sub.s.cfg.ConsumerGroup, sub.topic, sub.owner)
	if err != nil {
		sub.logger.Error("sqlitebus: cannot release lease; it expires by itself", err, nil)
	}
}
