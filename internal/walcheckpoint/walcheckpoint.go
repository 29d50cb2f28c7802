// Package walcheckpoint checkpoints a SQLite database in WAL mode from a goroutine of its own.
//
// By default SQLite checkpoints inside the commit that takes the write-ahead log past
// wal_autocheckpoint pages: that commit copies the log back into the database file and fsyncs
// both, while every writer behind it waits. A passive checkpoint on another connection does the
// same work beside the writers (it never takes the write lock), so the commit path only appends
// to the log. The databases keep their wal_autocheckpoint as a backstop for when this goroutine
// falls behind.
package walcheckpoint

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// DefaultInterval is how often Start checkpoints when no interval is given. A checkpoint copies
// every page the log holds into the database file once, however often it changed since the last
// one: the pages most commits change (the indexes by trail, the trails) change many times in
// half a second under load, and checkpointing every 100 ms copied each of them five times as
// often, for 3-4 % of the pipeline's CPU against 1-2 % now (docs/PERFORMANCE.md). The log's
// length is not the interval's: it restarts only when no reader is in it, and under the bench's
// steady reads it reached 7,000-8,700 pages with either interval. An idle database costs one
// cheap PRAGMA a tick.
const DefaultInterval = 500 * time.Millisecond

// Checkpointer runs passive checkpoints until Stop.
type Checkpointer struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu    sync.Mutex
	stats Stats
}

// Stats counts what the checkpointer did, for tests and diagnostics.
type Stats struct {
	Runs   int64 // checkpoints run
	Errors int64 // checkpoints that failed (each reported to onError)
	// Log and Backfilled are what the last successful checkpoint reported: the frames in the
	// log and how many of them are now in the database file (equal when it caught up).
	Log, Backfilled int64
}

// Start checkpoints db every interval (DefaultInterval when zero or less), each time on a
// connection borrowed from db's pool for the checkpoint only, so that a pool of one connection
// is shared rather than taken. onError receives failed checkpoints; nil ignores them. db must be
// a SQLite database in WAL mode that allows writes (a query_only connection cannot checkpoint).
func Start(db *sql.DB, interval time.Duration, onError func(error)) *Checkpointer {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if onError == nil {
		onError = func(error) {}
	}
	c := &Checkpointer{stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop(db, interval, onError)
	return c
}

func (c *Checkpointer) loop(db *sql.DB, interval time.Duration, onError func(error)) {
	defer close(c.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-c.stop
		cancel() // an interrupted checkpoint is safe: the next one copies what it left
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// busy is 1 when another checkpoint was running; log and done are the frames in the log
		// and those now in the database file.
		var busy, log, done int64
		err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &done)
		if ctx.Err() != nil {
			return // stopped: not a failure
		}
		c.mu.Lock()
		c.stats.Runs++
		if err != nil {
			c.stats.Errors++
		} else {
			c.stats.Log, c.stats.Backfilled = log, done
		}
		c.mu.Unlock()
		if err != nil {
			onError(fmt.Errorf("walcheckpoint: %w", err))
		}
	}
}

// Stats returns the counts so far.
func (c *Checkpointer) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Stop ends the checkpoints and waits for the one in progress to stop. It is idempotent.
func (c *Checkpointer) Stop() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}
