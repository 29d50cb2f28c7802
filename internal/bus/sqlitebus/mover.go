package sqlitebus

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/veritrail/veritrail/internal/retrybackoff"
)

// readJournalPosition returns the table's sqlitebus_journal row.
func (st *dbState) readJournalPosition() (journalPosition, error) {
	var pos journalPosition
	err := st.db.QueryRowContext(context.Background(),
		`SELECT epoch, moved FROM sqlitebus_journal WHERE id = 1`).Scan(&pos.epoch, &pos.moved)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return journalPosition{}, nil
	case err != nil:
		return journalPosition{}, fmt.Errorf("sqlitebus: read journal position: %w", err)
	}
	pos.ok = true
	return pos, nil
}

// moveLinger is how long the mover lets appends gather before it moves them:
// what a message waits before subscribers see it, once the journal was idle.
// While Publish calls come moveLoadedGap apart or closer (the moving average
// of their gaps that the publishers' group commit keeps), it lingers
// moveLingerLoaded instead: a move is one transaction of the bus's
// database, and what it moved is what the evaluator's next batch holds, so
// below full load a short linger made many small moves, each followed by a
// batch of a few messages with two commits and an evaluation round of its own.
// 10 ms instead of 2 cost 407 against 444 us an attestation at half capacity;
// 25 ms instead of 10 cost 317-350 against 328-459 us in four alternating pairs
// (docs/PERFORMANCE.md, 2026-11-27 14:20-15:21 and 19:00-19:14).
const (
	moveLinger       = 2 * time.Millisecond
	moveLoadedGap    = 5 * time.Millisecond
	moveLingerLoaded = 25 * time.Millisecond
)

// moveLoop copies the journal into the table whenever it grows, until stop
// is closed; then it moves what is left and returns. fixedLinger, when
// positive, replaces moveLingerFor's choice (Config.MoveLinger). A failed move is retried
// with backoff: the messages stay in the journal (and in memory) meanwhile.
func (st *dbState) moveLoop(j *journal, fixedLinger time.Duration, stop <-chan struct{}, logger watermill.LoggerAdapter) {
	retry := retrybackoff.New(10*time.Millisecond, 2*time.Second)
	linger := time.NewTimer(moveLinger)
	defer linger.Stop()
	for {
		moved, err := st.moveJournal(j)
		if err != nil {
			wait := retry.NextBackOff()
			logger.Error("sqlitebus: moving the publish journal into the table failed; retrying", err,
				watermill.LogFields{"retry_in": wait.String()})
			t := time.NewTimer(wait)
			select {
			case <-stop:
				t.Stop()
				return // the next open moves the rest
			case <-t.C:
			}
			continue
		}
		retry.Reset()
		if j.full() {
			if err := j.rotate(func() (bool, error) { n, err := st.moveJournal(j); return n > 0, err }); err != nil {
				logger.Error("sqlitebus: rotating the publish journal failed", err, nil)
			}
		}
		if moved >= moveBatch {
			continue // a backlog: move the rest at once
		}
		if moved == 0 {
			select {
			case <-j.wake:
			case <-stop:
				st.moveRest(j, logger)
				return
			}
		}
		// Let appends gather: a move costs about as much for one message as
		// for dozens, and under load the mover would otherwise chase every
		// append with a transaction of its own. A reader waiting for them
		// (Bus.Hurry) ends the wait.
		d := fixedLinger
		if d <= 0 {
			d = moveLingerFor(st.publishGap())
		}
		linger.Reset(d)
		select {
		case <-linger.C:
		case <-j.hurry:
			linger.Stop()
		case <-stop:
			st.moveRest(j, logger)
			return
		}
	}
}

// moveRest moves what the journal holds when the bus closes.
func (st *dbState) moveRest(j *journal, logger watermill.LoggerAdapter) {
	for {
		if moved, err := st.moveJournal(j); err != nil || moved == 0 {
			if err != nil {
				logger.Error("sqlitebus: moving the publish journal at close failed; the next open moves the rest", err, nil)
			}
			return
		}
	}
}

// moveLingerFor is moveLingerLoaded while Publish calls come gap apart on
// average, moveLoadedGap or closer, and moveLinger otherwise.
func moveLingerFor(gap time.Duration) time.Duration {
	if gap <= moveLoadedGap {
		return moveLingerLoaded
	}
	return moveLinger
}

// moveJournal copies up to moveBatch messages from the front of the pending
// journal into the table and records their end as moved, in one transaction.
// It answers how many it moved.
func (st *dbState) moveJournal(j *journal) (int, error) {
	j.pmu.Lock()
	chunks := slices.Clone(j.pending) // appends may reallocate j.pending; the chunks never change
	headDone := j.headDone
	j.pmu.Unlock()
	if len(chunks) == 0 {
		return 0, nil
	}

	var recs []journalRecord
	count, ci, off := 0, 0, headDone
	for ci < len(chunks) && count < moveBatch {
		c := chunks[ci]
		if off == len(c.data) {
			ci, off = ci+1, 0
			continue
		}
		rec, n, ok := readRecord(c.data[off:])
		if !ok { // checked when written or recovered: memory is damaged
			return 0, fmt.Errorf("journal record at offset %d does not decode", c.start+int64(off))
		}
		recs = append(recs, rec)
		count += len(rec.msgs)
		off += n
	}
	if ci < len(chunks) && off == len(chunks[ci].data) {
		ci, off = ci+1, 0
	}
	// The position after the last record moved.
	last := chunks[max(ci-1, 0)]
	epoch, moved := last.epoch, last.start+int64(len(last.data))
	if off > 0 {
		epoch, moved = chunks[ci].epoch, chunks[ci].start+int64(off)
	}

	if err := st.insertRecords(recs, epoch, moved); err != nil {
		return 0, err
	}

	consumed := off - headDone
	for _, c := range chunks[:ci] {
		consumed += len(c.data)
	}
	j.pmu.Lock()
	clear(j.pending[:ci]) // let the moved chunks be collected
	j.pending = j.pending[ci:]
	j.headDone = off
	j.pendingBytes -= consumed
	j.room.Broadcast()
	j.pmu.Unlock()

	topics := make(map[string]bool, 1)
	for _, r := range recs {
		if !topics[r.topic] {
			topics[r.topic] = true
			st.notify(r.topic)
		}
	}
	return count, nil
}

// insertRecords inserts the messages of recs and sets the journal position,
// in one transaction.
func (st *dbState) insertRecords(recs []journalRecord, epoch uint64, moved int64) error {
	return st.insertTx(func(ctx context.Context, tx *sql.Tx, stmt *sql.Stmt) error {
		for _, r := range recs {
			for _, m := range r.msgs {
				if err := insertRow(ctx, stmt, r.topic, m.uuid, m.payload, m.metadata, r.created); err != nil {
					return err
				}
			}
		}
		if _, err := tx.StmtContext(ctx, st.q.journal).ExecContext(ctx, epoch, moved); err != nil {
			return fmt.Errorf("record journal position: %w", err)
		}
		return nil
	})
}
