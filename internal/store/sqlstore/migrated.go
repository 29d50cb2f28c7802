package sqlstore

import (
	"context"
	"fmt"
)

// Migrated is nil when the schema has every migration this build knows applied (or a later
// one's, during a rolling upgrade), for readiness: a process whose schema is behind would
// fail its writes.
func (s *Store) Migrated(ctx context.Context) error {
	plan := s.d.migrations()
	v, err := plan.Version(ctx, s.r)
	if err != nil {
		return fmt.Errorf("sqlstore: read the schema version: %w", err)
	}
	if v < plan.Latest() {
		return fmt.Errorf("sqlstore: the schema is at version %d, this build needs %d (run the migrations)", v, plan.Latest())
	}
	return nil
}
