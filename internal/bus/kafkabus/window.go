package kafkabus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
)

// windowSubscriber is the subscriber of a Config with MaxInFlight above 1. watermill-kafka's
// subscriber hands a partition's next message out only once the previous one is acked, so a
// consumer that applies many messages in one transaction (bus/batch) gets at most one message
// per partition at a time. This one hands out up to MaxInFlight messages of a partition ahead of
// their acks, in order, and commits the offset of the acked prefix. A nacked message is
// delivered again after nackResendSleep, followed by the ones after it, so a partition's order
// holds across nacks as it does with watermill-kafka.
type windowSubscriber struct {
	cfg       Config
	sc        *sarama.Config
	marshaler kafka.MarshalerUnmarshaler
	topics    *topicEnsurer
	log       watermill.LoggerAdapter

	closing   chan struct{}
	closeOnce sync.Once
	running   sync.WaitGroup
}

// nackResendSleep is how long a nacked message waits before it is delivered again, as with
// watermill-kafka's default; reconnectSleep how long a failed group session waits to rejoin.
const (
	nackResendSleep = 100 * time.Millisecond
	reconnectSleep  = time.Second
)

func newWindowSubscriber(cfg Config, logger watermill.LoggerAdapter) *windowSubscriber {
	return &windowSubscriber{cfg: cfg, sc: subscriberSaramaConfig(cfg), marshaler: newMarshaler(), topics: newTopicEnsurer(cfg),
		log: logger, closing: make(chan struct{})}
}

// Subscribe joins the consumer group for topic. The channel closes when ctx ends or the
// subscriber closes, once no message of it is being handed out.
func (s *windowSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	select {
	case <-s.closing:
		return nil, errors.New("kafkabus: subscriber closed")
	default:
	}
	if err := s.topics.ensure(ctx, topic); err != nil {
		return nil, err
	}
	client, err := sarama.NewClient(s.cfg.Brokers, s.sc)
	if err != nil {
		return nil, fmt.Errorf("kafkabus: subscribing to %s: %w", topic, err)
	}
	group, err := sarama.NewConsumerGroupFromClient(s.cfg.ConsumerGroup, client)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("kafkabus: subscribing to %s: %w", topic, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan *message.Message)
	h := &windowHandler{s: s, out: out, fields: watermill.LogFields{"topic": topic, "group": s.cfg.ConsumerGroup}}
	s.running.Add(2)
	go func() { // Sarama's errors must be read, or its consumer stalls
		defer s.running.Done()
		for err := range group.Errors() {
			s.log.Error("kafkabus: consumer group error", err, h.fields)
		}
	}()
	go func() {
		defer s.running.Done()
		defer close(out) // after Consume returned: no claim is handing out messages any more
		defer client.Close()
		defer group.Close()
		for ctx.Err() == nil {
			err := group.Consume(ctx, []string{topic}, h)
			if errors.Is(err, sarama.ErrClosedConsumerGroup) || ctx.Err() != nil {
				return
			}
			if err != nil {
				s.log.Error("kafkabus: consumer group session failed; rejoining", err, h.fields)
				if !sleepCtx(ctx, reconnectSleep) {
					return
				}
			}
		}
	}()
	go func() {
		select {
		case <-s.closing:
		case <-ctx.Done():
		}
		cancel()
	}()
	return out, nil
}

// SubscribeInitialize implements message.SubscribeInitializer by creating the topic if it is missing.
func (s *windowSubscriber) SubscribeInitialize(topic string) error {
	return s.topics.ensure(context.Background(), topic)
}

// Close stops every subscription and waits until their channels are closed.
func (s *windowSubscriber) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.running.Wait()
	return nil
}

// windowHandler is one subscription's sarama.ConsumerGroupHandler.
type windowHandler struct {
	s      *windowSubscriber
	out    chan<- *message.Message
	fields watermill.LogFields
}

// Setup and Cleanup log each group session's partitions: after a rebalance they say which
// process took which partitions and when, which is what an operator asks once reads wait.
func (h *windowHandler) Setup(sess sarama.ConsumerGroupSession) error {
	h.s.log.Info("kafkabus: partitions assigned", h.sessionFields(sess))
	return nil
}

func (h *windowHandler) Cleanup(sess sarama.ConsumerGroupSession) error {
	h.s.log.Info("kafkabus: partitions released", h.sessionFields(sess))
	return nil
}

func (h *windowHandler) sessionFields(sess sarama.ConsumerGroupSession) watermill.LogFields {
	return h.fields.Add(watermill.LogFields{"generation": sess.GenerationID(), "member": sess.MemberID(),
		"partitions": fmt.Sprint(sess.Claims())})
}

// ConsumeClaim hands out one partition's messages in windows of up to MaxInFlight: what the
// claim has ready, without waiting for more. Each message of the acked prefix is marked as it is
// acked (Sarama commits marks every second, on rebalance and on close); the rest, from a nacked
// message on, is handed out again. It returns when the session ends: unacked messages then go to the
// partition's next owner.
func (h *windowHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	maxWindow := h.s.cfg.MaxInFlight
	window := make([]*sarama.ConsumerMessage, 0, maxWindow)
	for {
		if len(window) == 0 {
			select {
			case m, ok := <-claim.Messages():
				if !ok {
					return nil
				}
				window = append(window, m)
			case <-sess.Context().Done():
				return nil
			}
		}
	fill:
		for len(window) < maxWindow {
			select {
			case m, ok := <-claim.Messages():
				if !ok {
					break fill
				}
				window = append(window, m)
			default:
				break fill
			}
		}
		acked, nacked := h.deliver(sess, window)
		window = append(window[:0], window[acked:]...)
		select {
		case <-h.s.closing:
			return nil // the session ends a moment later; handing the rest out again would spin
		default:
		}
		if sess.Context().Err() != nil {
			return nil
		}
		if nacked && !sleepCtx(sess.Context(), nackResendSleep) {
			return nil
		}
	}
}

// deliver sends window's messages in order, each without waiting for the ack of the one before,
// until every one is acked, one is nacked or the session ends. It answers how many, from the
// first, were acked, and whether one was nacked.
func (h *windowHandler) deliver(sess sarama.ConsumerGroupSession, window []*sarama.ConsumerMessage) (acked int, nacked bool) {
	msgs := make([]*message.Message, len(window))
	cancels := make([]context.CancelFunc, len(window))
	defer func() {
		for _, cancel := range cancels {
			if cancel != nil {
				cancel() // the handlers of messages not acked are over: they will come again
			}
		}
	}()
	sent, stopped := 0, false
	for acked < len(window) && !nacked && !stopped {
		var out chan<- *message.Message
		var next *message.Message
		if sent < len(window) {
			if msgs[sent] == nil {
				msgs[sent], cancels[sent] = h.message(sess, window[sent])
			}
			out, next = h.out, msgs[sent]
		}
		var ack, nack <-chan struct{}
		if acked < sent {
			ack, nack = msgs[acked].Acked(), msgs[acked].Nacked()
		}
		select {
		case out <- next:
			sent++
		case <-ack:
			cancels[acked]() // a handler may stop once it acked
			sess.MarkMessage(window[acked], "")
			acked++
		case <-nack:
			nacked = true
		case <-sess.Context().Done():
			stopped = true
		case <-h.s.closing:
			stopped = true
		}
	}
	for stopped && acked < sent && isClosed(msgs[acked].Acked()) {
		// Keep the acks that raced with the stop: until this claim returns the partition is
		// still ours, and Sarama commits the marks when the session ends.
		sess.MarkMessage(window[acked], "")
		acked++
	}
	return acked, nacked
}

// message is the watermill message of m, with the partition and offset in its context.
func (h *windowHandler) message(sess sarama.ConsumerGroupSession, m *sarama.ConsumerMessage) (*message.Message, context.CancelFunc) {
	msg, _ := h.s.marshaler.Unmarshal(m) // the default unmarshaler cannot fail: it copies headers and value
	ctx, cancel := context.WithCancel(withPosition(sess.Context(), Position{Partition: m.Partition, Offset: m.Offset}))
	msg.SetContext(ctx)
	return msg, cancel
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// sleepCtx waits d and reports true, or reports false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Position is where a consumed message sits in its topic.
type Position struct {
	Partition int32
	Offset    int64
}

type positionKey struct{}

func withPosition(ctx context.Context, p Position) context.Context {
	return context.WithValue(ctx, positionKey{}, p)
}

// MessagePosition answers the partition and offset of a message a subscriber of this package
// handed out (either kind: watermill-kafka's keeps them in the context too).
func MessagePosition(msg *message.Message) (Position, bool) {
	if p, ok := msg.Context().Value(positionKey{}).(Position); ok {
		return p, true
	}
	part, ok1 := kafka.MessagePartitionFromCtx(msg.Context())
	off, ok2 := kafka.MessagePartitionOffsetFromCtx(msg.Context())
	return Position{Partition: part, Offset: off}, ok1 && ok2
}
