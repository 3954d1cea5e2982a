package lease

import (
	"math"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	lo, hi := 10*time.Millisecond, 500*time.Millisecond
	for n := range 100 {
		ceil := min(hi, lo<<min(n, 20))
		for range 50 {
			if d := Backoff(lo, hi, n); d < lo || d > ceil {
				t.Fatalf("Backoff(%v, %v, %d) = %v, want in [%v, %v]", lo, hi, n, d, lo, ceil)
			}
		}
	}
	// Huge bounds and counts: no overflow, never below lo.
	for _, n := range []int{0, 1, 62, 63, 64, 1000} {
		if d := Backoff(lo, math.MaxInt64, n); d < lo {
			t.Fatalf("Backoff(%v, MaxInt64, %d) = %v, below min", lo, n, d)
		}
	}
	if d := Backoff(hi, hi, 5); d != hi {
		t.Fatalf("Backoff(min = max) = %v, want %v", d, hi)
	}
}

// TestBackoff_hugeMaxOverflow: with a huge max, min·2^n does not wrap: for
// large n the sleeps stay uniform in [min, max], not stuck at min.
func TestBackoff_hugeMaxOverflow(t *testing.T) {
	lo := 10 * time.Millisecond
	for _, n := range []int{60, 100, 1000} {
		above := false
		for range 20 {
			d := Backoff(lo, math.MaxInt64, n)
			if d < lo {
				t.Fatalf("backoff(%d) = %v, below min %v", n, d, lo)
			}
			above = above || d > lo
		}
		if !above {
			t.Fatalf("backoff(%d) = min %v 20 times, want uniform in [min, max]: the ceiling overflowed", n, lo)
		}
	}
}

// TestBackoff_bounds: within sane bounds every sleep lies in
// [min, min(max, min·2^n)].
func TestBackoff_bounds(t *testing.T) {
	lo, hi := 10*time.Millisecond, 500*time.Millisecond
	for n := range 70 {
		ceil := hi
		if n < 6 {
			ceil = min(hi, lo<<n)
		}
		for range 10 {
			if d := Backoff(lo, hi, n); d < lo || d > ceil {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", n, d, lo, ceil)
			}
		}
	}
}
