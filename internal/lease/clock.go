package lease

import (
	"math"
	"time"
)

// epoch is the origin of the clock holds keep their times on: nanoseconds
// since epoch, a third of a time.Time's size. Readings come from the
// monotonic clock, so a step of the wall clock moves no deadline.
var epoch = time.Now()

// never is a reading the clock does not reach: an unset cap or deadline.
const never = math.MaxInt64

// mono returns t, a time.Now result, as a reading of the holds' clock.
// Inside a testing/synctest bubble time.Now has no monotonic reading, so the
// result is a wall-clock difference to the real epoch, possibly negative;
// differences between readings taken in one bubble are still exact.
func mono(t time.Time) int64 { return int64(t.Sub(epoch)) }

// monoNow is the clock's reading now.
func monoNow() int64 { return mono(time.Now()) }

// later returns reading m moved on by d >= 0, at most never: a TTL or a
// WithMaxHold cap may be as long as a Duration goes.
func later(m int64, d time.Duration) int64 {
	if n := m + int64(d); n >= m {
		return n
	}
	return never
}

// between returns the time from reading a to reading b, saturating as
// time.Time.Sub does (never minus a reading would overflow).
func between(a, b int64) time.Duration {
	d := time.Duration(b - a)
	switch {
	case b > a && d < 0:
		return math.MaxInt64
	case b < a && d > 0:
		return math.MinInt64
	}
	return d
}

// untilMono is the time from now until reading m; negative once m has passed.
func untilMono(m int64) time.Duration { return between(monoNow(), m) }
