package lease

import (
	"math"
	"testing"
	"time"
)

// TestClock_saturates: a TTL or WithMaxHold cap as long as a
// Duration goes must not wrap a hold's clock readings into the past (outside
// a synctest bubble readings are positive, so sentAt + max overflows).
func TestClock_saturates(t *testing.T) {
	now := monoNow()
	if got := later(now, math.MaxInt64); got != never {
		t.Fatalf("later(now, max) = %d, want never", got)
	}
	if got := later(now, time.Second); got != now+int64(time.Second) {
		t.Fatalf("later(now, 1s) = %d, want %d", got, now+int64(time.Second))
	}
	if got := between(-int64(time.Hour), never); got != math.MaxInt64 {
		t.Fatalf("between(-1h, never) = %v, want the longest Duration", got)
	}
	if got := between(never, -int64(time.Hour)); got != math.MinInt64 {
		t.Fatalf("between(never, -1h) = %v, want the most negative Duration", got)
	}
	if got := between(now, now+int64(time.Second)); got != time.Second {
		t.Fatalf("between(now, now+1s) = %v, want 1s", got)
	}
}
