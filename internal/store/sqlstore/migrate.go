package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
)

type addedColumn struct{ table, column, def string }

// addedColumns are columns a table gained after it was first released. CREATE TABLE IF NOT
// EXISTS leaves a table made by an older build as it was, so migrate adds them when missing.
// Each is also in its table's CREATE statement, which stays the table's full description.
func addedColumns() []addedColumn {
	return []addedColumn{
		{"api_keys", "service_account_id", "TEXT NOT NULL DEFAULT ''"},
		{"api_keys", "description", "TEXT NOT NULL DEFAULT ''"},
		{"applied_messages", "generation", "BIGINT NOT NULL DEFAULT 0"},
		{"dirty_trails", "evaluated", "BIGINT NOT NULL DEFAULT 0"},
	}
}

func (s *Store) addColumns(ctx context.Context, tx *sql.Tx) error {
	exists := `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`
	if s.d.name == postgresDialect.name {
		exists = `SELECT COUNT(*) FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`
	}
	for _, c := range addedColumns() {
		var n int
		if err := tx.QueryRowContext(ctx, exists, c.table, c.column).Scan(&n); err != nil {
			return fmt.Errorf("sqlstore: migrate: look for %s.%s: %w", c.table, c.column, err)
		}
		if n > 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, "ALTER TABLE "+c.table+" ADD COLUMN "+c.column+" "+c.def); err != nil {
			return fmt.Errorf("sqlstore: migrate: add %s.%s: %w", c.table, c.column, err)
		}
	}
	return nil
}
