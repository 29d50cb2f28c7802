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

// TestCut: on SQLite every part has a size kept prepared, however many items; on PostgreSQL the
// parts are as large as the parameters allow, and only a one-row part is prepared.
func TestCut(t *testing.T) {
	for _, tc := range []struct {
		d            dialect
		n, perRow    int
		want         []int
		wantPrepared []bool
	}{
		{sqliteDialect, 1, 1, []int{1}, []bool{true}},
		{sqliteDialect, 3, 2, []int{2, 1}, []bool{true, true}},
		{sqliteDialect, 300, 6, []int{64, 64, 64, 64, 32, 8, 4}, []bool{true, true, true, true, true, true, true}},
		{postgresDialect, 1, 1, []int{1}, []bool{true}},
		{postgresDialect, 300, 6, []int{300}, []bool{false}},
		{postgresDialect, 6000, 6, []int{5000, 1000}, []bool{false, false}},
	} {
		items := make([]int, tc.n)
		for i := range items {
			items[i] = i
		}
		var sizes, seen []int
		var prepared []bool
		if err := cut(tc.d, items, tc.perRow, func(part []int, p bool) error {
			sizes, prepared, seen = append(sizes, len(part)), append(prepared, p), append(seen, part...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sizes, tc.want) || !slices.Equal(prepared, tc.wantPrepared) || !slices.Equal(seen, items) {
			t.Errorf("%s, %d items of %d: parts %v prepared %v, want %v %v (in order: %v)", tc.d.name, tc.n, tc.perRow,
				sizes, prepared, tc.want, tc.wantPrepared, slices.Equal(seen, items))
		}
	}
}
