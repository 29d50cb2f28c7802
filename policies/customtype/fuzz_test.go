package customtype

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// FuzzCompileAndEvaluate feeds user-controlled schema, rule and data through
// the whole pipeline: nothing may panic, definition problems must surface as
// *DefinitionError, data problems as *DataError, and results must be coherent.
func FuzzCompileAndEvaluate(f *testing.F) {
	f.Add([]byte(personSchema), ".age >= 18", []byte(personData))
	f.Add([]byte(coverageSchema), ".line_coverage >= 80", []byte(`{"line_coverage": 85, "total_lines": 10, "covered_lines": 8}`))
	f.Add([]byte(`{"type": "array", "items": {"type": "number"}}`), "map(. > 1) | all", []byte(`[1, 2.5, 1e400]`))
	f.Add([]byte(`{"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`), ".", []byte(`true`))
	f.Add([]byte(`{"type": 5}`), "(", []byte(`{}`))
	f.Add([]byte(`{"pattern": "^a+$", "minLength": 2}`), `test("a")`, []byte(`"aaa"`))
	f.Add([]byte(`true`), `.[] | tostring | length > 1`, []byte(`{"k": 12345678901234567890}`))

	f.Fuzz(func(t *testing.T, schema []byte, rule string, data []byte) {
		typ, err := Compile(schema, []string{rule})
		if err != nil {
			var de *DefinitionError
			if !errors.As(err, &de) || len(de.Fields) == 0 {
				t.Fatalf("Compile error %v (%T) is not a non-empty *DefinitionError", err, err)
			}
			return
		}
		for _, useNumber := range []bool{false, true} {
			dec := json.NewDecoder(bytes.NewReader(data))
			if useNumber {
				dec.UseNumber()
			}
			var v any
			if dec.Decode(&v) != nil {
				return
			}
			if err := typ.Check(v); err != nil {
				var de *DataError
				if !errors.As(err, &de) || len(de.Fields) == 0 {
					t.Fatalf("Check error %v (%T) is not a non-empty *DataError", err, err)
				}
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			compliant, results := typ.Evaluate(ctx, v)
			cancel()
			if len(results) != 1 || results[0].Rule != rule {
				t.Fatalf("results = %+v; want one result for %q", results, rule)
			}
			if compliant != results[0].Passed {
				t.Fatalf("compliant = %v but result = %+v", compliant, results[0])
			}
			if results[0].Passed && results[0].Error != "" {
				t.Fatalf("passed rule carries an error: %+v", results[0])
			}
		}
	})
}
