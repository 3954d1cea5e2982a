package lockutil

import (
	"errors"
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

func TestJoinErrs(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	if JoinErrs() != nil || JoinErrs(nil, nil) != nil {
		t.Fatal("JoinErrs of nothing is not nil")
	}
	if JoinErrs(nil, a) != a {
		t.Fatal("JoinErrs of one error is not that error")
	}
	if err := JoinErrs(a, nil, b); !errors.Is(err, a) || !errors.Is(err, b) {
		t.Fatalf("JoinErrs(a, b) = %v, want both", err)
	}
}

func TestMinTime(t *testing.T) {
	now := time.Now()
	later := now.Add(time.Second)
	if MinTime(now, later) != now || MinTime(later, now) != now {
		t.Fatal("MinTime did not pick the earlier time")
	}
}
