package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"

	"github.com/veritrail/veritrail/internal/migrate"
)

// A snapshot's artifacts document is most of what the store holds of environments: about
// 860 bytes an artifact, so 860 KB for a 1,000-artifact snapshot, much of it repeated between
// artifacts (flow names, trail names, commit URLs). On SQLite, documents over compressFrom
// bytes are kept S2-compressed in artifacts_s2 (about a twelfth of the size, written in under a
// millisecond and read in about half of one), with artifacts left empty; smaller ones stay
// readable text in artifacts. Snapshots written before migration 14 keep their text.
//
// PostgreSQL keeps writing text: its TOAST already compresses large values, and a distributed
// installation in the middle of an upgrade runs processes of the previous build, which read
// only artifacts. Both stores read both columns, so a later build can compress there too once
// no process of a build before this one can be running.
const compressFrom = 4 << 10

// snapshotDocs is migration 14.
func (d dialect) snapshotDocs() func(context.Context, migrate.Execer) error {
	return migrate.Statements(`ALTER TABLE snapshots ADD COLUMN artifacts_s2 ` + d.blob)
}

// encodeSnapshotDoc answers the two columns a document is stored in. A compressed document is
// written into scratch when it has room (s2.MaxEncodedLen), which the caller may reuse once the
// statement ran.
func (d dialect) encodeSnapshotDoc(doc json.RawMessage, scratch []byte) (text string, compressed []byte) {
	if len(doc) <= compressFrom || d.name == postgresDialect.name {
		return string(doc), nil
	}
	return "", s2.Encode(scratch, doc)
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

// bufPool lends byte buffers.
type bufPool struct{ p sync.Pool }

// get lends a buffer of length n (none for n < 0).
func (b *bufPool) get(n int) *[]byte {
	n = max(n, 0)
	buf, _ := b.p.Get().(*[]byte)
	if buf == nil || cap(*buf) < n {
		s := make([]byte, n)
		return &s
	}
	*buf = (*buf)[:n]
	return buf
}

// put takes back a buffer get lent, which its borrower no longer uses.
func (b *bufPool) put(buf *[]byte) { b.p.Put(buf) }
