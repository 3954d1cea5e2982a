package main

import (
	"context"
	"slices"
	"testing"
)

func TestInterleave_recordsEachRoundsOrder(t *testing.T) {
	names := []string{"a", "b", "c"}
	t.Cleanup(func() { shuffleRounds = false })
	for _, shuffle := range []bool{false, true} {
		shuffleRounds = shuffle
		e := &env{ctx: context.Background()}
		tb := newTable("T", "test", "a", column{Key: "x", Ratio: true})
		var ran [][]string
		err := e.interleave(tb, 4, names, func(r int, n string) (map[string]float64, error) {
			if len(ran) <= r {
				ran = append(ran, nil)
			}
			ran[r] = append(ran[r], n)
			return map[string]float64{"x": 1}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(tb.Runs, ran, slices.Equal) {
			t.Errorf("shuffle=%v: recorded orders %v, ran %v", shuffle, tb.Runs, ran)
		}
		for r, order := range ran {
			want := rotate(names, r)
			if shuffle {
				want = shuffled(names, r)
			}
			if !slices.Equal(order, want) {
				t.Errorf("shuffle=%v: round %d ran %v, want %v", shuffle, r, order, want)
			}
		}
		for _, n := range names {
			if got := len(tb.Rows[n].Rounds); got != 4 {
				t.Errorf("shuffle=%v: %s has %d rounds, want 4", shuffle, n, got)
			}
		}
	}
}
