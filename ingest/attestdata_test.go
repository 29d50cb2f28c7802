package ingest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// decodeBothWays is what attest did before decodeAttestationData: the whole body into
// AttestationCommon, then into the map.
func decodeBothWays(raw []byte) (AttestationCommon, map[string]json.RawMessage, error) {
	var common AttestationCommon
	if err := decodeJSONPart("data_json", raw, &common); err != nil {
		return common, nil, err
	}
	var fields map[string]json.RawMessage
	err := decodeJSONPart("data_json", raw, &fields)
	return common, fields, err
}

var attestDataSeeds = []string{
	`{"attestation_name": "unit", "user_data": {"pad": "xxxx"}}`,
	`{"attestation_name": "unit", "artifact_fingerprint": "` + strings.Repeat("a", 64) + `", "target_artifacts": ["app"],
		"git_commit_info": {"sha1": "abc"}, "repo_info": {"name": "r"}, "external_urls": {"x": {"url": "u"}},
		"annotations": {"k": "v"}, "origin_url": "https://ci", "description": "d", "is_compliant": true}`,
	`{"Attestation_Name": "folded", "attestation_name": "exact"}`,
	`{"attestation_name": "exact", "ATTESTATION_NAME": "folded-last"}`,
	`{"attestation_name": "a", "attestation_name": "b"}`,
	`{"attestation_name": 5}`,
	`{"target_artifacts": "app", "attestation_name": 5}`,
	`{"attestation_name": "a", "description": ["x"], "origin_url": 1}`,
	`{"attestation_name": null, "target_artifacts": null, "git_commit_info": null}`,
	`{"attestation_name": "k", "user_data": 3, "USER_DATA": "x"}`,
	`{"attestation_name": "a", "target_artifacts": [1]}`,
	`null`, `[]`, `"x"`, `1`, `true`, `{`, `{"a": 1} trailing`, ``, `   `, `{"a": 1}{"b": 2}`,
	"{\"attestation_\u212aame\": \"kelvin\"}",
	// What splitObject finds the ends of: nested values, brackets and quotes inside strings,
	// backslashes before a closing quote, bare literals against the brace, escaped and non-ASCII keys.
	`{"attestation_name":"n","user_data":{"a":[1,{"b":"}]\"["}],"c":"x\\","d":"\\\"q"},"n":-1.5e3,"t":true}`,
	" {\n\t\"attestation_name\" :\r\"n\" , \"z\":null,\"e\":[ ] ,\"o\":{ }}\n",
	`{"description":"x\\","attestation_name":"n"}`, `{"description":"\"\\\"","attestation_name":"n"}`,
	`{}`, `{"a":0}`, `{"a":"\u0022"}`,
	`{"attestation\u005fname": "escaped key"}`, `{"attestation_name": "a", "\u00e9t\u00e9": 1, "été": 2}`,
	"{\"attestation_name\": \"a\", \"k\xff\": 1}",
	// The text rules, on either path, before type errors.
	`{"attestation_name": "nul\u0000"}`, `{"user_data": {"a": ["\u0000"]}}`, `{"d": "\\u0000"}`, `{"d": "\\\u0000"}`,
	`{"attestation_name": 5, "d": "\u0000"}`, `{"attestation\u005fname": "a", "d": "\u0000"}`, `"\u0000"`,
	"{\"d\": \"\xff\"}", "{\"attestation\\u005fname\": \"\xff\"}", "{\"a\": 1}]\xff", "[\"\xc0\"]",
}

// TestDecodeAttestationData: one pass gives what the two decodes gave, errors included.
func TestDecodeAttestationData(t *testing.T) {
	for _, body := range attestDataSeeds {
		checkAttestationData(t, []byte(body))
	}
}

// FuzzDecodeAttestationData: any data_json decodes as the two decodes decoded it.
func FuzzDecodeAttestationData(f *testing.F) {
	for _, body := range attestDataSeeds {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkAttestationData(t, raw)
	})
}

func checkAttestationData(t *testing.T, raw []byte) {
	t.Helper()
	wantCommon, wantFields, wantErr := decodeBothWays(raw)
	// The text rules come first for any document that is JSON, and for what the decoder accepts.
	if (wantErr == nil || json.Valid(raw)) && !jsonTextOK(raw) {
		wantErr = textError("data_json", raw)
	}
	common, fields, err := decodeAttestationData(raw)
	if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("%q: error %v, want %v", raw, err, wantErr)
	}
	if wantErr != nil {
		if !reflect.DeepEqual(err, wantErr) {
			t.Fatalf("%q: error %#v, want %#v", raw, err, wantErr)
		}
		return
	}
	if !reflect.DeepEqual(common, wantCommon) {
		t.Fatalf("%q: common %+v, want %+v", raw, common, wantCommon)
	}
	if !reflect.DeepEqual(fields, wantFields) {
		t.Fatalf("%q: fields %v, want %v", raw, fields, wantFields)
	}
}

// TestCommonKeys: commonKeys names every field of AttestationCommon.
func TestCommonKeys(t *testing.T) {
	var want []string
	typ := reflect.TypeFor[AttestationCommon]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		want = append(want, name)
	}
	if !reflect.DeepEqual(commonKeys[:], want) {
		t.Fatalf("commonKeys %v, want %v", commonKeys, want)
	}
}

// BenchmarkSplitObject: splitObject against the decoder it replaces, on the bench's data_json
// (a long string of user data) and on nested user data of the same size.
func BenchmarkSplitObject(b *testing.B) {
	nested := `{"attestation_name":"unit","is_compliant":true,"origin_url":"https://ci.example.com/run/1","user_data":{"suites":[`
	for i := range 12 {
		if i > 0 {
			nested += ","
		}
		nested += fmt.Sprintf(`{"name":"suite-%d","tests":%d,"failures":0,"time":%d.25,"cases":["a","b"]}`, i, 10+i, i)
	}
	nested += `]}}`
	for _, tc := range []struct{ name, body string }{
		{"string", `{"attestation_name":"smoke","is_compliant":true,"origin_url":"https://ci.example.com/run/1","user_data":{"pad":"` +
			strings.Repeat("x", 800) + `"}}`},
		{"nested", nested},
	} {
		raw := []byte(tc.body)
		b.Run(tc.name+"/split", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, ok := splitObject(raw); !ok {
					b.Fatal("not split")
				}
			}
		})
		b.Run(tc.name+"/decoder", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				var fields map[string]json.RawMessage
				if err := decodeJSONPart("data_json", raw, &fields); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// validJSONSeeds are where a JSON scanner may disagree with encoding/json's: escapes of lone and
// swapped surrogates, invalid UTF-8, repeated names, whitespace alone, a byte order mark, numbers
// at their edges, control characters, documents after documents.
var validJSONSeeds = []string{
	`{"a":"\ud800"}`, `{"a":"\udc00\ud800"}`, "{\"a\":\"\xff\"}", "[\"\xc0\x80\"]", `{"a":1,"a":2}`, ` {} `, ``, `   `,
	`{"a":1}{"b":2}`, `1e999`, `-0`, `-`, `01`, `1.`, `.5`, `1e`, `[1,]`, `{"a":1,}`, `"\u0000"`, "\"\x00\"", "\"\x1f\"",
	"\xef\xbb\xbf{}", `{"a":tru}`, `nul`, `"\x"`, `"\u12"`, `[[[[[]]]]]`, `{"":""}`, "\t\n\r 1 \t\n\r",
}

// TestValidJSONAsEncodingJSON: validJSON answers what json.Valid answers.
func TestValidJSONAsEncodingJSON(t *testing.T) {
	for _, s := range append(validJSONSeeds, attestDataSeeds...) {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("%q: %v, json.Valid %v", s, got, want)
		}
	}
}

// FuzzValidJSON: validJSON answers what json.Valid answers, for any bytes.
func FuzzValidJSON(f *testing.F) {
	for _, s := range append(validJSONSeeds, attestDataSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("%q: %v, json.Valid %v", b, got, want)
		}
	})
}

// BenchmarkValidJSON: validJSON against json.Valid on the bench's data_json.
func BenchmarkValidJSON(b *testing.B) {
	raw := []byte(`{"attestation_name":"smoke","is_compliant":true,"origin_url":"https://ci.example.com/run/1","user_data":{"pad":"` +
		strings.Repeat("x", 800) + `"}}`)
	for name, valid := range map[string]func([]byte) bool{"validJSON": validJSON, "encoding-json": json.Valid} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if !valid(raw) {
					b.Fatal("not valid")
				}
			}
		})
	}
}
