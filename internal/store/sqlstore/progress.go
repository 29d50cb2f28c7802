package sqlstore

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/veritrail/veritrail/internal/store"
)

func (s *Store) AdvancePositions(ctx context.Context, topic string, next map[int32]int64) error {
	if len(next) == 0 {
		return nil
	}
	parts := slices.Sorted(maps.Keys(next)) // rows locked in one order by every evaluator
	args := make([]any, 0, 3*len(parts))
	for _, p := range parts {
		args = append(args, topic, p, next[p])
	}
	return s.exec(ctx, "advance bus positions", oneOff+`INSERT INTO bus_positions (topic, part, next_offset)
		VALUES `+rowsOf(len(parts), 3)+` ON CONFLICT (topic, part) DO UPDATE SET next_offset = CASE
		WHEN excluded.next_offset > bus_positions.next_offset THEN excluded.next_offset ELSE bus_positions.next_offset END`, args...)
}

func (s *Store) Positions(ctx context.Context, topic string) (map[int32]int64, error) {
	r := s.reader()
	rows, err := r.rows(ctx, `SELECT part, next_offset FROM bus_positions WHERE topic = ?`, topic)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: bus positions: %w", err)
	}
	defer rows.Close()
	out := map[int32]int64{}
	for rows.Next() {
		var p int32
		var next int64
		if err := rows.Scan(&p, &next); err != nil {
			return nil, fmt.Errorf("sqlstore: bus positions: %w", err)
		}
		out[p] = next
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: bus positions: %w", err)
	}
	return out, nil
}

func (s *Store) MarkInFlight(ctx context.Context, orgID, process string, until float64) error {
	return s.exec(ctx, "mark writes in flight", `INSERT INTO writes_in_flight (org_id, process, until) VALUES (?, ?, ?)
		ON CONFLICT (org_id, process) DO UPDATE SET until = excluded.until`, orgID, process, until)
}

func (s *Store) RenewInFlight(ctx context.Context, process string, until float64) error {
	return s.exec(ctx, "renew writes in flight", `UPDATE writes_in_flight SET until = ? WHERE process = ?`, until, process)
}

func (s *Store) ClearInFlight(ctx context.Context, orgID, process string) error {
	return s.exec(ctx, "clear writes in flight", `DELETE FROM writes_in_flight WHERE org_id = ? AND process = ?`, orgID, process)
}

func (s *Store) ClearExpiredInFlight(ctx context.Context, orgID, process string, before float64) error {
	return s.exec(ctx, "clear expired writes in flight", `DELETE FROM writes_in_flight WHERE org_id = ? AND process = ? AND until < ?`,
		orgID, process, before)
}

func (s *Store) InFlight(ctx context.Context, orgID string) ([]store.InFlightMark, error) {
	r := s.reader()
	rows, err := r.rows(ctx, `SELECT process, until FROM writes_in_flight WHERE org_id = ?`, orgID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: writes in flight: %w", err)
	}
	defer rows.Close()
	var out []store.InFlightMark
	for rows.Next() {
		m := store.InFlightMark{OrgID: orgID}
		if err := rows.Scan(&m.Process, &m.Until); err != nil {
			return nil, fmt.Errorf("sqlstore: writes in flight: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: writes in flight: %w", err)
	}
	return out, nil
}
