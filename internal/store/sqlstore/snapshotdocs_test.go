package sqlstore

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/klauspost/compress/s2"
)

// TestSnapshotDocs: large documents are compressed on SQLite and kept as text on PostgreSQL
// (whose processes of the previous build read only the text); either form reads back.
func TestSnapshotDocs(t *testing.T) {
	var large bytes.Buffer
	large.WriteString("[")
	for i := range 200 {
		fmt.Fprintf(&large, `{"name":"app-%d","flows":[{"flow_name":"web","state":"COMPLIANT"}]},`, i)
	}
	large.WriteString(`{}]`)
	for _, tc := range []struct {
		d          dialect
		doc        []byte
		compressed bool
	}{
		{sqliteDialect, []byte(`[]`), false},
		{sqliteDialect, large.Bytes(), true},
		{postgresDialect, large.Bytes(), false},
	} {
		// A scratch buffer with room is written into; one without is not used.
		for _, scratch := range [][]byte{nil, make([]byte, s2.MaxEncodedLen(len(tc.doc)))} {
			text, z := tc.d.encodeSnapshotDoc(tc.doc, scratch)
			if (z != nil) != tc.compressed || (z != nil && (text != "" || len(z) >= len(tc.doc)/4)) {
				t.Errorf("%s, %d bytes: text %d bytes, compressed %d bytes", tc.d.name, len(tc.doc), len(text), len(z))
			}
			if got, err := decodeSnapshotDoc(text, z); err != nil || !bytes.Equal(got, tc.doc) {
				t.Errorf("%s, read back: %d bytes, %v", tc.d.name, len(got), err)
			}
			if z != nil && scratch != nil && &z[0] != &scratch[0] {
				t.Errorf("%s: the scratch buffer was not used", tc.d.name)
			}
		}
	}
	if _, err := decodeSnapshotDoc("", []byte("not s2")); err == nil {
		t.Error("a corrupt compressed document decoded")
	}
}
