package main

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {0, 1}} {
		if got := percentile(slices.Clone(ds), tc.p); got != tc.want {
			t.Errorf("percentile(p%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile(nil) = %v, want 0", got)
	}
}

func TestMedian(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median odd = %v, want 2", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median even = %v, want 2.5", got)
	}
	if got := median([]float64{math.NaN(), 7}); got != 7 {
		t.Errorf("median with NaN = %v, want 7", got)
	}
	if got := median(nil); !math.IsNaN(got) {
		t.Errorf("median(nil) = %v, want NaN", got)
	}
}

func TestRotate(t *testing.T) {
	xs := []string{"a", "b", "c"}
	for k, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if got := rotate(xs, k); !slices.Equal(got, want) {
			t.Errorf("rotate(%d) = %v, want %v", k, got, want)
		}
	}
}

func TestShuffled_seededPermutation(t *testing.T) {
	xs := []string{"a", "b", "c", "d", "e", "f"}
	seen := map[string]bool{}
	for k := range 20 {
		got := shuffled(xs, k)
		if again := shuffled(xs, k); !slices.Equal(got, again) {
			t.Fatalf("shuffled(%d) = %v, then %v: want the same order for the same seed", k, got, again)
		}
		if sorted := slices.Sorted(slices.Values(got)); !slices.Equal(sorted, xs) {
			t.Fatalf("shuffled(%d) = %v: not a permutation of %v", k, got, xs)
		}
		seen[strings.Join(got, "")] = true
	}
	if len(seen) < 10 {
		t.Errorf("20 seeds gave %d distinct orders, want most of them distinct", len(seen))
	}
	if xs[0] != "a" || xs[5] != "f" {
		t.Errorf("shuffled changed its input: %v", xs)
	}
}

func TestTableSummarize_ratioPerRound(t *testing.T) {
	tb := newTable("T", "test", "base", column{Key: "x", Ratio: true})
	// The ratio is taken per round, then the median: rounds where both are
	// slow count as 1×, not as a difference of medians.
	tb.row("base").Rounds = []map[string]num{{"x": 10}, {"x": 100}, {"x": 10}}
	tb.row("other").Rounds = []map[string]num{{"x": 20}, {"x": 100}, {"x": 10}}
	tb.summarize()
	if got := tb.rat("other", "x"); got != 1 {
		t.Errorf("ratio = %v, want 1 (median of 2, 1, 1)", got)
	}
	if got := tb.med("other", "x"); got != 20 {
		t.Errorf("median = %v, want 20", got)
	}
}

func TestNumJSON_nanIsNull(t *testing.T) {
	b, err := json.Marshal(map[string]num{"a": num(math.NaN()), "b": 1.5})
	if err != nil {
		t.Fatalf("Marshal() error = %v", err)
	}
	if got, want := string(b), `{"a":null,"b":1.5}`; got != want {
		t.Errorf("Marshal() = %s, want %s", got, want)
	}
}

func TestNumJSON_nullIsNaN(t *testing.T) {
	var m map[string]num
	if err := json.Unmarshal([]byte(`{"a":null,"b":1.5}`), &m); err != nil {
		t.Fatalf("Unmarshal() error = %v", err)
	}
	if !math.IsNaN(float64(m["a"])) || m["b"] != 1.5 {
		t.Errorf("Unmarshal() = %v, want a NaN, b 1.5", m)
	}
}

func TestGroupTicks(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	pipes := []pipeEvent{
		{at: at(0), cmds: 500, script: true},
		{at: at(2), cmds: 2}, // a new connection's handshake
		{at: at(3), cmds: 120, script: true},
		{at: at(1000), cmds: 500, script: true},
		{at: at(1001), cmds: 500, script: true},
	}
	ticks, cmds, ideal, rts, detail := groupTicksDetail(pipes, 50*time.Millisecond)
	if ticks != 2 || cmds != 1620 || ideal != 4 || rts != 4 || len(detail) != 2 {
		t.Errorf("groupTicksDetail() = %d ticks, %d cmds, %d ideal, %d RT, %q; want 2, 1620, 4, 4, two ticks",
			ticks, cmds, ideal, rts, detail)
	}
}
