package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/retrybackoff"
	"github.com/veritrail/veritrail/internal/store"
)

// positionRecorder records how far the evaluator has applied each partition of the evidence
// topic (store.Progress), for reads at the ingest processes: a read that must see what another
// ingest process acknowledged waits until these positions reach the bus's end offsets taken when
// it started. A position is recorded after the batch that applied it committed, so it never runs
// ahead of what is applied (a crash in between only leaves it behind until the redelivery). One
// write at a time, of the latest positions, so its cost does not grow with the evaluator's rate:
// under load a write carries every batch handled while the previous one was under way.
type positionRecorder struct {
	st    store.Progress
	topic string
	log   *slog.Logger

	mu   sync.Mutex
	next map[int32]int64 // handled and not yet recorded: partition -> next offset
	wake chan struct{}
}

func newPositionRecorder(st store.Progress, topic string, log *slog.Logger) *positionRecorder {
	return &positionRecorder{st: st, topic: topic, log: log, next: map[int32]int64{}, wake: make(chan struct{}, 1)}
}

// handled notes messages the evaluator is done with (applied, or set aside for good).
func (r *positionRecorder) handled(msgs []*message.Message) {
	if len(msgs) == 0 {
		return
	}
	r.mu.Lock()
	for _, m := range msgs {
		if pos, ok := kafkabus.MessagePosition(m); ok {
			r.next[pos.Partition] = max(r.next[pos.Partition], pos.Offset+1)
		}
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run writes the positions as they move until ctx ends; a failed write is retried with the
// positions noted since.
func (r *positionRecorder) run(ctx context.Context) error {
	retry := retrybackoff.New(10*time.Millisecond, 2*time.Second)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		}
		r.mu.Lock()
		next := r.next
		r.next = map[int32]int64{}
		r.mu.Unlock()
		if len(next) == 0 {
			continue
		}
		if err := r.st.AdvancePositions(ctx, r.topic, next); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait := retry.NextBackOff()
			r.log.Warn("evaluate: recording the applied positions failed; retrying", "err", err, "retry_in", wait)
			r.mu.Lock()
			for p, o := range next {
				r.next[p] = max(r.next[p], o)
			}
			r.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			select {
			case r.wake <- struct{}{}:
			default:
			}
			continue
		}
		retry.Reset()
	}
}
