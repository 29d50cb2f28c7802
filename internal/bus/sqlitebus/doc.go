// Package sqlitebus is a durable watermill Publisher/Subscriber backed by a
// single SQLite database. It is the embedded message bus of `veritrail serve`,
// where one process runs ingest, evaluate and notify.
//
// Messages of all topics live in one append-only table; each message gets an
// AUTOINCREMENT offset, so offsets only grow, even after Compact has deleted
// rows. Publish inserts all of its messages in one transaction and returns
// after the commit: a nil error means the messages survive a crash of the
// process (see Open for the exact guarantee).
//
// Subscribers come in two kinds:
//
//   - With a consumer group, the acknowledged offset is stored per
//     (consumer group, topic). A subscriber restarted with the same group
//     resumes after the last acked message (at-least-once). All subscribers of
//     a group share one stream per topic: one message is in flight at a time
//     (or a window of MaxInFlight, for a consumer that handles them in
//     batches), claimed with a lease row in the database, so two subscribers
//     of a group never process the same message while both are healthy, and
//     the order is kept across them.
//   - With an empty consumer group, a subscriber is an independent consumer:
//     every Subscribe call reads the topic from the oldest retained message,
//     keeps its position only in memory and writes nothing to the database.
//
// Within one process, publishers and subscribers created from the same Bus (or
// sharing one Hub) wake each other through channels, so delivery does not wait
// for a poll interval. Messages written by another process are found by
// polling every PollInterval.
package sqlitebus
