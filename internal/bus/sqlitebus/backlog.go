package sqlitebus

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
)

// Unacked calls fn once for every message of topic that consumerGroup has not acknowledged, in
// publish order: those in the table after the group's acked offset (all of the topic when the
// group never subscribed), then those the publish journal holds and the mover has not moved
// into the table yet. The journal is read first, so that a message the mover moves meanwhile
// is found in the table and not missed; it is reported from there, once. Metadata that does not
// decode is reported empty. A process that restarts on the bus uses it to learn the backlog that
// the previous one acknowledged to its publishers and its consumers had not handled.
func (b *Bus) Unacked(ctx context.Context, consumerGroup, topic string, fn func(uuid string, md message.Metadata) error) error {
	type pendingMsg struct {
		uuid     string
		metadata []byte
	}
	var pending []pendingMsg
	inJournal := map[string]bool{} // pending uuid -> not yet found in the table
	if b.jr != nil {
		b.jr.eachPending(func(rec journalRecord) {
			if rec.topic != topic {
				return
			}
			for _, m := range rec.msgs {
				pending = append(pending, pendingMsg{m.uuid, m.metadata})
				inJournal[m.uuid] = true
			}
		})
	}
	rows, err := b.db.QueryContext(ctx, `SELECT uuid, metadata FROM sqlitebus_messages
		WHERE topic = ? AND "offset" > COALESCE(
			(SELECT acked_offset FROM sqlitebus_offsets WHERE consumer_group = ? AND topic = ?), 0)
		ORDER BY "offset"`, topic, consumerGroup, topic)
	if err != nil {
		return fmt.Errorf("sqlitebus: unacked messages of %s: %w", topic, err)
	}
	defer rows.Close()
	for rows.Next() {
		var uuid, md string
		if err := rows.Scan(&uuid, &md); err != nil {
			return fmt.Errorf("sqlitebus: unacked messages of %s: %w", topic, err)
		}
		if inJournal[uuid] {
			inJournal[uuid] = false // moved meanwhile: reported here, not again below
		}
		if err := fn(uuid, unackedMetadata([]byte(md))); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlitebus: unacked messages of %s: %w", topic, err)
	}
	for _, m := range pending {
		if !inJournal[m.uuid] {
			continue
		}
		if err := fn(m.uuid, unackedMetadata(m.metadata)); err != nil {
			return err
		}
	}
	return nil
}

// unackedMetadata is b decoded, or empty when it does not decode.
func unackedMetadata(b []byte) message.Metadata {
	md, _ := decodeMetadata(b)
	return md
}
