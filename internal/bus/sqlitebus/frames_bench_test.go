package sqlitebus

import (
	"context"
	"database/sql"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// BenchmarkWALFrames reports the WAL frames (pages) a commit of five 1.5 KB messages writes,
// what an ingest group commit holds under load: each frame costs two write system calls. "bus"
// is the Publisher; the others insert the same rows into one table of a given shape, the
// first being the bus's own, so that the cost of its AUTOINCREMENT sequence and its
// (topic, offset) index can be read off against tables without them.
//
//	go test -run x -bench WALFrames ./bus/sqlitebus
func BenchmarkWALFrames(b *testing.B) {
	const group = 5
	payload := make([]byte, 1500)
	md := `{"partition_key":"org/flow/trail-123","vt_kind":"attestation.reported","vt_org":"org","vt_schema":"1"}`

	b.Run("bus", func(b *testing.B) {
		db, err := Open(tempDBPath(b))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		// One publisher in a loop: no linger, each Publish is one commit.
		bus, err := New(db, Config{CompactInterval: -1, CheckpointInterval: -1, PublishLinger: -1}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer bus.Close()
		pub := mustPublisher(b, bus)
		countFrames(b, db, func() error {
			msgs := make([]*message.Message, group)
			for i := range msgs {
				msgs[i] = message.NewMessage(watermill.NewUUID(), payload)
				msgs[i].Metadata.Set("partition_key", "org/flow/trail-123")
			}
			return pub.Publish("veritrail.evidence.v1", msgs...)
		})
	})

	const columns = `topic TEXT NOT NULL, uuid TEXT NOT NULL, payload BLOB NOT NULL, metadata TEXT NOT NULL, created_at INTEGER NOT NULL`
	for _, shape := range []struct {
		name   string
		schema []string
	}{
		{"table=autoincrement+index", []string{
			`CREATE TABLE m ("offset" INTEGER PRIMARY KEY AUTOINCREMENT, ` + columns + `)`,
			`CREATE INDEX m_topic_offset ON m (topic, "offset")`}},
		{"table=autoincrement", []string{`CREATE TABLE m ("offset" INTEGER PRIMARY KEY AUTOINCREMENT, ` + columns + `)`}},
		{"table=rowid", []string{`CREATE TABLE m ("offset" INTEGER PRIMARY KEY, ` + columns + `)`}},
	} {
		b.Run(shape.name, func(b *testing.B) {
			db, err := Open(tempDBPath(b))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			for _, s := range shape.schema {
				if _, err := db.Exec(s); err != nil {
					b.Fatal(err)
				}
			}
			countFrames(b, db, func() error {
				tx, err := db.Begin()
				if err != nil {
					return err
				}
				for range group {
					if _, err := tx.Exec(`INSERT INTO m (topic, uuid, payload, metadata, created_at) VALUES (?, ?, ?, ?, ?)`,
						"veritrail.evidence.v1", watermill.NewUUID(), payload, md, 1); err != nil {
						_ = tx.Rollback()
						return err
					}
				}
				return tx.Commit()
			})
		})
	}
}

// countFrames runs commit b.N times and reports the WAL frames per commit. The log is
// counted (a passive checkpoint reports the frames it holds) and emptied every 500 commits,
// long before SQLite's automatic checkpoint (8,192 pages) would empty it unseen.
func countFrames(b *testing.B, db *sql.DB, commit func() error) {
	b.Helper()
	const every = 500
	ctx := context.Background()
	drain := func() int64 {
		var busy, log, done int64
		if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &done); err != nil {
			b.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, new(int64), new(int64)); err != nil {
			b.Fatal(err)
		}
		if busy != 0 {
			b.Fatal("checkpoint blocked: the log was not emptied")
		}
		return log
	}
	for range 50 { // past the first pages of a new table
		if err := commit(); err != nil {
			b.Fatal(err)
		}
	}
	drain()
	var frames, n int64
	for b.Loop() {
		if err := commit(); err != nil {
			b.Fatal(err)
		}
		if n++; n%every == 0 {
			b.StopTimer()
			frames += drain()
			b.StartTimer()
		}
	}
	frames += drain()
	b.ReportMetric(float64(frames)/float64(n), "frames/commit")
}
