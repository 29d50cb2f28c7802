package snapshot

import (
	"bytes"
	"testing"
)

func TestDigest(t *testing.T) {
	base := []Running{
		{Name: "api", Fingerprint: "f1", Instances: 2, CreationTimestamps: []float64{1, 2}},
		{Name: "web", Fingerprint: "f2", Instances: 1, CreationTimestamps: []float64{3}},
	}
	same := map[string][]Running{
		"another order": {base[1], base[0]},
		"other contexts": {
			{Name: "api", Fingerprint: "f1", Instances: 2, CreationTimestamps: []float64{1, 2}, Contexts: []map[string]any{{"pod": "a"}, {"pod": "b"}}},
			base[1],
		},
	}
	different := map[string][]Running{
		"a count":       {{Name: "api", Fingerprint: "f1", Instances: 3, CreationTimestamps: []float64{1, 2, 4}}, base[1]},
		"a timestamp":   {{Name: "api", Fingerprint: "f1", Instances: 2, CreationTimestamps: []float64{1, 5}}, base[1]},
		"a fingerprint": {{Name: "api", Fingerprint: "f9", Instances: 2, CreationTimestamps: []float64{1, 2}}, base[1]},
		"a name":        {{Name: "ap", Fingerprint: "if1", Instances: 2, CreationTimestamps: []float64{1, 2}}, base[1]},
		"one gone":      base[:1],
		"empty":         nil,
	}
	d := Digest(base)
	for name, set := range same {
		if !bytes.Equal(Digest(set), d) {
			t.Errorf("%s: digest differs", name)
		}
	}
	for name, set := range different {
		if bytes.Equal(Digest(set), d) {
			t.Errorf("%s: same digest", name)
		}
	}
}
