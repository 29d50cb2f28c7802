package sqlstore

import (
	"context"
	"database/sql"
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

// scopesInFlightTable is migration 12's: the scopes of each mark of writes_in_flight, so that a
// read at another process waits only when a write it depends on may be in flight.
const scopesInFlightTable = `CREATE TABLE IF NOT EXISTS writes_in_flight_scopes (
	org_id TEXT NOT NULL, scope TEXT NOT NULL, process TEXT NOT NULL, PRIMARY KEY (org_id, scope, process))`

func (s *Store) MarkInFlight(ctx context.Context, orgID, process string, until float64, scopes []string) error {
	if err := s.exec(ctx, "mark writes in flight", `INSERT INTO writes_in_flight (org_id, process, until) VALUES (?, ?, ?)
		ON CONFLICT (org_id, process) DO UPDATE SET until = excluded.until`, orgID, process, until); err != nil {
		return err
	}
	return preparedChunks(slices.Sorted(slices.Values(scopes)), 3, func(part []string) error {
		args := make([]any, 0, 3*len(part))
		for _, sc := range part {
			args = append(args, orgID, sc, process)
		}
		return s.exec(ctx, "mark scopes in flight", oneOffIf(len(part) > preparedRows)+`INSERT INTO writes_in_flight_scopes
			(org_id, scope, process) VALUES `+rowsOf(len(part), 3)+` ON CONFLICT DO NOTHING`, args...)
	})
}

func (s *Store) RenewInFlight(ctx context.Context, process string, until float64) error {
	return s.exec(ctx, "renew writes in flight", `UPDATE writes_in_flight SET until = ? WHERE process = ?`, until, process)
}

// ClearInFlight removes the scopes first, then the mark: a reader in between sees a mark with no
// scope, which holds every read (InFlightScopes), so it waits more, never less.
func (s *Store) ClearInFlight(ctx context.Context, orgID, process string) error {
	if err := s.exec(ctx, "clear scopes in flight", `DELETE FROM writes_in_flight_scopes WHERE org_id = ? AND process = ?`,
		orgID, process); err != nil {
		return err
	}
	return s.exec(ctx, "clear writes in flight", `DELETE FROM writes_in_flight WHERE org_id = ? AND process = ?`, orgID, process)
}

func (s *Store) ClearScopesInFlight(ctx context.Context, orgID, process string, scopes []string) error {
	return preparedChunks(slices.Sorted(slices.Values(scopes)), 1, func(part []string) error {
		return s.exec(ctx, "clear scopes in flight", oneOffIf(len(part) > preparedRows)+`DELETE FROM writes_in_flight_scopes
			WHERE org_id = ? AND process = ? AND scope IN (`+placeholders(len(part))+`)`, append([]any{orgID, process}, anys(part)...)...)
	})
}

func (s *Store) ClearExpiredInFlight(ctx context.Context, orgID, process string, before float64) error {
	if err := s.exec(ctx, "clear expired scopes in flight", `DELETE FROM writes_in_flight_scopes WHERE org_id = ? AND process = ?
		AND EXISTS (SELECT 1 FROM writes_in_flight w WHERE w.org_id = ? AND w.process = ? AND w.until < ?)`,
		orgID, process, orgID, process, before); err != nil {
		return err
	}
	return s.exec(ctx, "clear expired writes in flight", `DELETE FROM writes_in_flight WHERE org_id = ? AND process = ? AND until < ?`,
		orgID, process, before)
}

// InFlightScopes also answers the marks that hold no scope at all: those of a build before
// scopes were recorded (a rolling upgrade), whose writes may be of any scope.
func (s *Store) InFlightScopes(ctx context.Context, orgID string, scopes []string) ([]store.InFlightScope, error) {
	if len(scopes) == 0 {
		return nil, nil
	}
	var out []store.InFlightScope
	err := preparedChunks(slices.Compact(slices.Sorted(slices.Values(scopes))), 1, func(part []string) error {
		rows, err := s.reader().rows(ctx, oneOffIf(len(part) > preparedRows)+`SELECT w.process, s.scope FROM writes_in_flight w
			LEFT JOIN writes_in_flight_scopes s ON s.org_id = w.org_id AND s.process = w.process AND s.scope IN (`+
			placeholders(len(part))+`) WHERE w.org_id = ? AND (s.scope IS NOT NULL OR NOT EXISTS (SELECT 1
			FROM writes_in_flight_scopes x WHERE x.org_id = w.org_id AND x.process = w.process))`,
			append(anys(part), orgID)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var h store.InFlightScope
			var sc sql.NullString
			if err := rows.Scan(&h.Process, &sc); err != nil {
				return err
			}
			h.Scope, h.Every = sc.String, !sc.Valid
			if !slices.Contains(out, h) { // a mark with no scope answers every part
				out = append(out, h)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: scopes in flight: %w", err)
	}
	return out, nil
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
