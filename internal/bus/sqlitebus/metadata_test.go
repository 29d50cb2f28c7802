package sqlitebus

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
)

// TestDecodeMetadataAsEncodingJSON: metadata decodes as encoding/json decodes it, for what Publish
// writes and for what it never writes (a repeated name, invalid UTF-8, null), and what does not
// decode is an error with empty metadata.
func TestDecodeMetadataAsEncodingJSON(t *testing.T) {
	published, err := json.Marshal(message.Metadata{"partition_key": "org/flow/trail <1> & \u2028", "kind": "attestation_reported", "org": "o"})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		string(published), `{}`, `null`, ` { "a" : "1" , "a" : "2" } `, "{\"a\":\"\xff\xfe\"}", `{"a":"\ud800"}`,
	} {
		want := message.Metadata{}
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%q: encoding/json: %v", in, err)
		}
		if want == nil {
			want = message.Metadata{}
		}
		got, err := decodeMetadata([]byte(in))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{``, `{`, `[]`, `{"a":1}`, `{"a":"1"} x`} {
		if got, err := decodeMetadata([]byte(in)); err == nil || got == nil || len(got) != 0 {
			t.Errorf("%q: %v, %v; want an error and empty metadata", in, got, err)
		}
	}
}

// BenchmarkDecodeMetadata: an evidence message's metadata, as ingest publishes it, decoded by
// encoding/json and by decodeMetadata.
//
//	go test -run x -bench DecodeMetadata -benchmem ./internal/bus/sqlitebus
func BenchmarkDecodeMetadata(b *testing.B) {
	p, err := json.Marshal(message.Metadata{"partition_key": "8f14e45f-ceea-467f-a0e6-5c2a4f6e0b1d/9b2c1f04-7e1a-4c36-9f0e-0a3b5d6c7e8f/main-1234",
		"kind": "attestation_reported", "org": "8f14e45f-ceea-467f-a0e6-5c2a4f6e0b1d", "schema": "3"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			md := message.Metadata{}
			if err := json.Unmarshal(p, &md); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeMetadata", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeMetadata(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
