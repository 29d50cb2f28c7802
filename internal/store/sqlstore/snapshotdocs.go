package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/klauspost/compress/s2"

	"github.com/veritrail/veritrail/internal/migrate"
)

// A snapshot's artifacts document is most of what the store holds of environments: about
// 860 bytes an artifact, so 860 KB for a 1,000-artifact snapshot, much of it repeated between
// artifacts (flow names, trail names, commit URLs). Documents over compressFrom bytes are kept
// S2-compressed in artifacts_s2 (about a twelfth of the size, written in under a millisecond and
// read in about half of one), with artifacts left empty; smaller ones stay readable text in
// artifacts. Snapshots written before migration 14 keep their text.
const compressFrom = 4 << 10

// snapshotDocs is migration 14. PostgreSQL keeps the column out of line without its own
// compression, which would only spend CPU on compressed bytes.
func (d dialect) snapshotDocs() func(context.Context, migrate.Execer) error {
	stmts := []string{`ALTER TABLE snapshots ADD COLUMN artifacts_s2 ` + d.blob}
	if d.name == postgresDialect.name {
		stmts = append(stmts, `ALTER TABLE snapshots ALTER COLUMN artifacts_s2 SET STORAGE EXTERNAL`)
	}
	return migrate.Statements(stmts...)
}

// encodeSnapshotDoc answers the two columns a document is stored in.
func encodeSnapshotDoc(doc json.RawMessage) (text string, compressed []byte) {
	if len(doc) <= compressFrom {
		return string(doc), nil
	}
	return "", s2.Encode(nil, doc)
}

// decodeSnapshotDoc is the document stored in the two columns.
func decodeSnapshotDoc(text string, compressed []byte) (json.RawMessage, error) {
	if compressed == nil {
		return json.RawMessage(text), nil
	}
	doc, err := s2.Decode(nil, compressed)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: decompress snapshot: %w", err)
	}
	return doc, nil
}
