package lock

import (
	"log/slog"
	"math"
	"sync"
	"time"
)

// hold is one acquisition of a Lock: from a successful Acquire until Release
// or loss. A Lock that is acquired again gets a new hold.
type hold struct {
	l     *Lock
	token string
	fence int64
	lost  chan struct{} // made on first use; closed when the hold ends involuntarily

	relMu sync.Mutex // serializes Releases of this hold

	mu        sync.Mutex
	ended     bool          // released or lost; nothing more to report
	releasing bool          // a Release is out: only its own answer may report a loss
	cause     *LostError    // set when lost
	onLost    []func(error) // called once with the *LostError
	afterFn   *time.Timer   // the deadline timer a Close leaves behind

	// Renewal bookkeeping, guarded by the Client's renewal.mu. Times are
	// clock readings (see mono). A write is an acquire, renewal or Extend
	// call; see renewal.extending for the rules that keep deadline safe
	// while writes with different TTLs overlap.
	ttl        time.Duration
	sentAt     int64 // when the write that set deadline was sent
	deadline   int64 // lost if no write confirms the hold again by then
	settledAt  int64 // when the last renewal or Extend reply (or failure) came
	next       int64 // when the renewal loop looks at this hold again
	capAt      int64 // WithMaxHold: no renewal past this; never = no cap
	index      int   // position in the renewal heap; -1 when not in it
	inFlight   bool  // a renewal call for it is under way
	registered bool  // known to the renewal loop
	extending  int32 // Extend calls out
	lastErr    error // the last renewal error, cleared by a success
	// extDeadline is the earliest deadline of the Extends that may still
	// land after the renewal in flight (or the next one): those out, and
	// those answered while it was out. never = none.
	extDeadline int64
}

// epoch is the origin of the clock holds keep their times on: nanoseconds
// since epoch, a third of a time.Time's size. Readings come from the
// monotonic clock, so a step of the wall clock moves no deadline.
var epoch = time.Now()

// never is a reading the clock does not reach: an unset capAt or extDeadline.
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

// safetyMargin is how long before its TTL would run out (counted from when
// the confirming call was sent) a hold that renewal could not confirm is
// declared lost: a tenth of the TTL, plus 2ms. It covers clock-rate
// differences between client and server (far under 1%) and leaves the holder
// time to stop before anyone else can take the lock.
// For TTLs under 4ms the margin is capped at half the TTL, so even a 1ms
// lease leaves a window in which a hold can be confirmed.
func safetyMargin(ttl time.Duration) time.Duration {
	return min(ttl/10+2*time.Millisecond, ttl/2)
}

func newHold(l *Lock, token string, fence int64, sent time.Time) *hold {
	h := &hold{
		l:           l,
		token:       token,
		fence:       fence,
		ttl:         l.cfg.ttl,
		sentAt:      mono(sent),
		settledAt:   math.MinInt64, // the acquire's reply came before any other call
		capAt:       never,
		extDeadline: never,
		index:       -1,
	}
	h.deadline = later(h.sentAt, h.ttl-safetyMargin(h.ttl))
	if l.cfg.maxHold > 0 {
		h.capAt = later(h.sentAt, l.cfg.maxHold)
	}
	return h
}

// pastDeadline reports whether now is at or past h's safety deadline.
func (h *hold) pastDeadline(now time.Time) bool { return mono(now) >= h.deadline }

// closedChan is what Lost returns for a hold lost before anyone asked.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// lostChan returns the channel closed when h is lost. It is made on first
// use: most holds end without anyone selecting on it.
func (h *hold) lostChan() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost == nil {
		if h.cause != nil {
			return closedChan
		}
		h.lost = make(chan struct{})
	}
	return h.lost
}

// active reports whether the hold has neither been released nor lost.
func (h *hold) active() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.ended
}

// beginRelease marks a Release as out; it reports whether the hold had
// already ended (released or lost).
func (h *hold) beginRelease() (ended bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.releasing = true
	return h.ended
}

// finish ends the hold by Release.
func (h *hold) finish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.afterFn != nil {
		h.afterFn.Stop()
	}
	h.ended, h.releasing = true, false
}

// lostErr returns the loss, or nil while the hold is not lost.
func (h *hold) lostErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cause == nil {
		return nil
	}
	return h.cause
}

// addOnLost registers fn to be called with the loss; at once if the hold is
// already lost.
func (h *hold) addOnLost(fn func(error)) {
	h.mu.Lock()
	if h.cause != nil {
		cause := h.cause
		h.mu.Unlock()
		fn(cause)
		return
	}
	h.onLost = append(h.onLost, fn)
	h.mu.Unlock()
}

// markLost is the one place a loss is signalled: it closes Lost(), cancels
// WithLock's context, tells the Observer and the logger. Only the first call
// for an active hold has an effect.
func (h *hold) markLost(reason LossReason, err error) { h.lose(reason, err, false) }

// lose is markLost; byRelease marks the loss Release found, the only one
// reported while a Release is out (an Extend racing it would otherwise see
// the key it deletes gone).
func (h *hold) lose(reason LossReason, err error, byRelease bool) {
	h.mu.Lock()
	if h.ended || (h.releasing && !byRelease) {
		h.mu.Unlock()
		return
	}
	h.ended = true
	h.cause = &LostError{Key: h.l.k.User, Reason: reason, Err: err}
	fns := h.onLost
	h.onLost = nil
	cause := h.cause
	ch := h.lost
	h.mu.Unlock()

	if ch != nil {
		close(ch)
	}
	for _, fn := range fns {
		fn(cause)
	}
	l := h.l
	if o := l.cfg.observer; o != nil {
		o.Observe(Event{Kind: EventLost, Key: l.k.User, Token: l.publicToken(h.token), Fence: h.fence, Err: cause})
	}
	if lg := l.cfg.logger; lg != nil {
		lg.Warn("lock lost", slog.String("key", l.k.User), slog.String("reason", reason.String()),
			slog.Int64("fence", h.fence), slog.Any("err", err))
	}
}

// lossReason names why Redis no longer has our hold: someone else's token,
// or no key at all (expired by our clock, or removed while it should have
// been valid).
func lossReason(st extendStatus, now int64, ttl time.Duration, sentAt int64) LossReason {
	if st == extendStolen {
		return LossStolen
	}
	if between(sentAt, now) >= ttl {
		return LossExpired
	}
	return LossForceReleased
}
