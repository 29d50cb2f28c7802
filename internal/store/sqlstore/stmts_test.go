package sqlstore

import (
	"errors"
	"slices"
	"testing"
)

func TestPreparedChunks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		perRow int
		want   []int
	}{
		{"none", 0, 1, nil},
		{"one", 1, 1, []int{1}},
		{"a full part", 64, 4, []int{64}},
		{"parts of powers of two after the full ones", 100, 16, []int{64, 32, 4}},
		{"odd sizes", 63, 2, []int{32, 16, 8, 4, 2, 1}},
		{"the largest batch", 256, 3, []int{64, 64, 64, 64}},
		{"more than a batch goes in one-off parts", 257, 1, []int{257}},
		{"more than a batch, cut at the parameter limit", 20000, 2, []int{15000, 5000}},
		{"rows too wide for a full part", 100, 1000, []int{30, 30, 30, 8, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items := make([]int, tc.n)
			for i := range items {
				items[i] = i
			}
			var sizes []int
			var seen []int
			if err := preparedChunks(items, tc.perRow, func(part []int) error {
				sizes = append(sizes, len(part))
				seen = append(seen, part...)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sizes, tc.want) {
				t.Errorf("parts %v, want %v", sizes, tc.want)
			}
			if !slices.Equal(seen, items) {
				t.Errorf("the parts do not cover the items in order")
			}
		})
	}
	t.Run("an error stops the parts", func(t *testing.T) {
		boom := errors.New("boom")
		calls := 0
		err := preparedChunks(make([]int, 200), 1, func([]int) error { calls++; return boom })
		if !errors.Is(err, boom) || calls != 1 {
			t.Errorf("err %v after %d calls, want boom after 1", err, calls)
		}
	})
}
