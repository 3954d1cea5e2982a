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
