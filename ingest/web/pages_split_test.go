package web

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

// TestSnapshotEntries: the split gives the entries encoding/json gives, and refuses what it
// refuses.
func TestSnapshotEntries(t *testing.T) {
	for _, doc := range []string{
		``, `null`, `[]`, ` [ ] `,
		`[{"name":"a","fingerprint":"f1"}]`,
		"[ {\"name\": \"a\", \"pods\": [{\"x\": [1, 2, {\"y\": null}]}]} ,\n {\"name\":\"b\"}, 3, \"s\", true, null ]",
	} {
		got, err := snapshotEntries(store.Snapshot{Artifacts: json.RawMessage(doc)})
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		var want []json.RawMessage
		if doc != "" {
			if err := json.Unmarshal([]byte(doc), &want); err != nil {
				t.Fatal(err)
			}
		}
		if fmt.Sprintf("%s", got) != fmt.Sprintf("%s", want) || len(got) != len(want) {
			t.Errorf("%q: split into %s, encoding/json gives %s", doc, got, want)
		}
	}
	for _, doc := range []string{`{}`, `[1,`, `[1 2]`, `[}`, `"a"`} {
		if _, err := snapshotEntries(store.Snapshot{Artifacts: json.RawMessage(doc)}); err == nil {
			t.Errorf("%q: split without an error", doc)
		}
	}
}

// BenchmarkSnapshotEntries splits a snapshot of 1,000 artifacts with pods, with the split and,
// as the baseline, encoding/json's unmarshalling into raw messages (what it replaced).
func BenchmarkSnapshotEntries(b *testing.B) {
	snap := benchSnapshot()
	b.Run("split", func(b *testing.B) {
		b.SetBytes(int64(len(snap.Artifacts)))
		for b.Loop() {
			if _, err := snapshotEntries(snap); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(snap.Artifacts)))
		for b.Loop() {
			var raw []json.RawMessage
			if err := json.Unmarshal(snap.Artifacts, &raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchSnapshot() store.Snapshot {
	var sb strings.Builder
	sb.WriteString("[")
	for i := range 1000 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"name":"service-%d","fingerprint":"%064x","pods":[{"pod":"p-%d","namespace":"prod","started":1700000000}],"annotation":{"type":"started"}}`, i, i, i)
	}
	sb.WriteString("]")
	return store.Snapshot{Artifacts: json.RawMessage(sb.String())}
}
