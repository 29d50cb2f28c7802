package contract

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// TestMarshalAttestation: an attestation's envelope decodes to what json.Marshal's encoding
// decodes to, with its Data copied as it is when it is an object, and falls back to
// json.Marshal otherwise.
func TestMarshalAttestation(t *testing.T) {
	desc := "a <b> & c"
	tests := []struct {
		name     string
		env      Envelope
		verbatim bool // Data appears in the encoding byte for byte
	}{
		{"plain", Envelope{ID: "e1", Kind: KindAttestationReported, OrgID: "o", Attestation: &AttestationInput{
			ID: "a1", FlowID: "f", TrailName: "t", Name: "unit", Type: "generic", IsCompliant: true,
			Data: json.RawMessage(`{"attestation_name": "unit", "user_data": {"x": "<y> & \"z\"", "n": [1, 2.50]}}`)}}, true},
		{"request, evidence and override", Envelope{ID: "e2", Kind: KindAttestationReported, OrgID: "o", At: 1.5,
			Actor: Actor{KeyID: "k", Name: desc}, Request: &Request{Operation: "attestGeneric", Target: "/attestations/o/f/trail/t/generic"},
			Attestation: &AttestationInput{ID: "a2", Name: "n", ArtifactFingerprint: "ab", TargetArtifact: "app",
				Overrides: &Override{AttestationID: "a1", Reason: "r"}, Evidence: &BlobRef{SHA256: "s", Size: 3, Filename: "f"},
				Data: json.RawMessage(`{}`)}}, true},
		{"repo_info beside the data", Envelope{ID: "e6", Kind: KindAttestationReported, OrgID: "o", Attestation: &AttestationInput{
			ID: "a6", Name: "n", RepoInfo: json.RawMessage(`{"id":"1","name":"acme/app","url":"u"}`),
			Data: json.RawMessage(`{"repo_info": {"id":"1","name":"acme/app","url":"u"}, "pad": "xxxx"}`)}}, true},
		{"data not an object", Envelope{ID: "e3", Kind: KindAttestationReported, OrgID: "o",
			Attestation: &AttestationInput{ID: "a3", Data: json.RawMessage(` [1, 2] `)}}, false},
		{"no data", Envelope{ID: "e4", Kind: KindAttestationReported, OrgID: "o", Attestation: &AttestationInput{ID: "a4"}}, false},
		{"a field after the attestation", Envelope{ID: "e5", Kind: KindAttestationReported, OrgID: "o",
			Attestation: &AttestationInput{ID: "a5", Data: json.RawMessage(`{"a": 1}`)}, Control: &ControlChange{Identifier: "c"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.env
			got, err := Marshal(&e)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON: %s", got)
			}
			if v := bytes.Contains(got, tt.env.Attestation.Data); len(tt.env.Attestation.Data) > 0 && v != tt.verbatim {
				t.Fatalf("Data copied verbatim: %v, want %v: %s", v, tt.verbatim, got)
			}
			ref := tt.env
			ref.Version = SchemaVersion
			want, err := json.Marshal(&ref)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("decodes to\n%v\nwant\n%v", g, w)
			}
			back, err := Unmarshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if back.Attestation == nil || back.Attestation.ID != tt.env.Attestation.ID || back.Version != SchemaVersion {
				t.Fatalf("round trip: %+v", back)
			}
			if e.Attestation != tt.env.Attestation || !bytes.Equal(e.Attestation.Data, tt.env.Attestation.Data) {
				t.Fatal("Marshal changed the caller's attestation")
			}
		})
	}
}

func BenchmarkMarshalAttestation(b *testing.B) {
	data, _ := json.Marshal(map[string]any{"attestation_name": "unit", "is_compliant": true,
		"user_data": map[string]string{"pad": string(bytes.Repeat([]byte("x"), 900))}})
	env := Envelope{ID: "e", Kind: KindAttestationReported, OrgID: "o", Actor: Actor{KeyID: "k", Name: "n"},
		Attestation: &AttestationInput{ID: "a", FlowID: "f", TrailName: "t", Name: "unit", Type: "generic", Data: data}}
	b.Run("spliced", func(b *testing.B) {
		for b.Loop() {
			if _, err := Marshal(&env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) { // the baseline: what Marshal did before
		for b.Loop() {
			if _, err := json.Marshal(&env); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestUnmarshalDecodesAsEncodingJSON: Unmarshal uses a faster decoder than encoding/json, and
// a message that decoder refused would be set aside after its 201. On what ingest may let
// through (invalid UTF-8 in evidence, keys in another case, duplicate and unknown keys, nulls)
// it decodes what encoding/json decodes and refuses what it refuses.
func TestUnmarshalDecodesAsEncodingJSON(t *testing.T) {
	head := `{"id":"m1","org_id":"o1","kind":"attestation.reported","at":1.5,`
	for _, c := range []struct{ name, body string }{
		{"plain", head + `"attestation":{"id":"a1","flow_id":"f","trail_name":"t","name":"n","type":"generic","is_compliant":true,"data":{"x":[1,2.5,"s",null]}}}`},
		{"invalid UTF-8 in data", head + "\"attestation\":{\"id\":\"a1\",\"data\":{\"x\":\"\xff\xfe\"}}}"},
		{"invalid UTF-8 in a field", head + "\"attestation\":{\"id\":\"a\xff1\"}}"},
		{"keys in another case", `{"ID":"m1","Org_ID":"o1","KIND":"attestation.reported"}`},
		{"duplicate keys", head + `"kind":"trail.begun","trail":{"id":"t1","id":"t2"}}`},
		{"unknown keys", head + `"later":{"a":1},"attestation":{"id":"a1","new":true}}`},
		{"nulls", head + `"attestation":null,"request":null,"actor":null}`},
		{"escaped", head + `"attestation":{"id":"a\u00e91\ud83d\ude00","data":"\"quoted\""}}`},
		{"lone surrogate", head + `"attestation":{"id":"a\ud800"}}`},
		{"number for a string", head + `"attestation":{"id":1}}`},
		{"broken", head + `"attestation":{"id":"a1"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var want Envelope
			wantErr := json.Unmarshal([]byte(c.body), &want)
			got, err := Unmarshal([]byte(c.body))
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("Unmarshal error %v, encoding/json's %v", err, wantErr)
			}
			if err == nil && !reflect.DeepEqual(*got, want) {
				t.Errorf("Unmarshal = %+v\nencoding/json: %+v", *got, want)
			}
		})
	}
}
