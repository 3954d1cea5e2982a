package redlock

import (
	"log/slog"
	"sync"
	"time"

	lock "github.com/agentlock/lock"
)

// hold is one acquisition of a Lock, from a successful Acquire until Release
// or loss. A Lock that is acquired again gets a new hold.
type hold struct {
	l     *Lock
	token string
	fence int64
	lost  chan struct{} // closed when the hold ends involuntarily
	stop  chan struct{} // closed by Release: renewal ends
	kick  chan struct{} // an Extend moved the renewal schedule
	acq   *round        // the acquire round; Release lets it end first

	op sync.Mutex // serialises Extend and renewal rounds

	mu         sync.Mutex
	ttl        time.Duration // what renewals send: the last Extend's, or shorter
	ttlCap     time.Duration // the validity counts on no longer TTL; 0 = no cap (see unanswered)
	sentAt     time.Time     // when the last confirmed acquire, extend or renewal was sent
	validUntil time.Time     // sentAt + ttl - drift: the hold is valid before it
	ended      bool          // released or lost
	releasing  bool          // a Release is out: only its own answer may report a loss
	stopped    bool          // stop is closed
	cause      *lock.LostError
	onLost     []func(error)
	afterFn    *time.Timer // reports the loss at validUntil once renewal stopped
	starter    *time.Timer // starts the renewal goroutine when it is first due
	renewing   bool        // the renewal goroutine was started (or refused by Close)
}

func newHold(l *Lock, token string, fence int64, sent, validUntil time.Time) *hold {
	return &hold{
		l: l, token: token, fence: fence,
		lost: make(chan struct{}), stop: make(chan struct{}), kick: make(chan struct{}, 1),
		ttl: l.cfg.ttl, sentAt: sent, validUntil: validUntil,
	}
}

// validity returns the validity left at now (<= 0 once it ran out).
func (h *hold) validity(now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return 0
	}
	return h.validUntil.Sub(now)
}

func (h *hold) active() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.ended
}

// confirmed records a quorum confirmation of a round sent at sent with ttl.
// Extend and renewal rounds never overlap (h.op), so of the calls that were
// answered the latest round's TTL is the one the nodes hold; the validity
// counts on it only up to the cap (see unanswered).
func (h *hold) confirmed(sent time.Time, ttl time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ttl = ttl
	h.sentAt = sent
	eff := h.cappedLocked(ttl)
	h.validUntil = sent.Add(eff - drift(eff, h.l.cfg.driftFactor))
}

// unanswered records that a round sending ttl left calls whose outcome is
// unknown: they failed, or no reply came by the round's deadline. Such a
// call may still land on its node at any later time (its bytes on the wire
// when ContextTimeoutEnabled cut it, or read by a stopped node once it
// resumes) and set ttl from then on, after a later round with a longer TTL
// was confirmed. So no later validity counts on a TTL longer than ttl: a
// round confirmed at sent is valid until sent + min(its TTL, cap), which
// such a late call can only leave or lengthen. The cap is never lifted
// within the hold, since nothing tells when such a call can no longer land;
// renewals still send the hold's TTL, and come every cap/3.
func (h *hold) unanswered(ttl time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ttlCap == 0 || ttl < h.ttlCap {
		h.ttlCap = ttl
	}
}

// capped returns the TTL a validity may count on for a round sending ttl:
// ttl, at most the cap (see unanswered).
func (h *hold) capped(ttl time.Duration) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cappedLocked(ttl)
}

func (h *hold) cappedLocked(ttl time.Duration) time.Duration {
	if h.ttlCap > 0 && h.ttlCap < ttl {
		return h.ttlCap
	}
	return ttl
}

// shorten moves the end of the validity back to validUntil and the TTL down
// to ttl, where they are earlier or shorter: an Extend round about to send
// ttl may leave some nodes with it whatever its outcome. It re-arms the loss
// timer that Close armed, and reports whether anything changed.
func (h *hold) shorten(validUntil time.Time, ttl time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := false
	if ttl < h.ttl {
		// Renewals then send ttl too: a late call of this round reaching
		// a node after a renewal can then only lengthen its TTL.
		h.ttl, changed = ttl, true
	}
	if validUntil.Before(h.validUntil) {
		h.validUntil, changed = validUntil, true
		if h.afterFn != nil {
			h.afterFn.Reset(time.Until(validUntil))
		}
	}
	return changed
}

// moved tells the renewal goroutine that the validity or the TTL changed,
// starting it if it was not running yet: a renewal or the loss may now be
// due sooner than it was scheduled.
func (h *hold) moved() {
	h.startRenewal()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// deadline returns the end of the hold's validity.
func (h *hold) deadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.validUntil
}

// stopRenewal ends the renewal goroutine, if any.
func (h *hold) stopRenewal() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped {
		h.stopped = true
		close(h.stop)
	}
	if h.afterFn != nil {
		h.afterFn.Stop()
	}
	if h.starter != nil {
		h.starter.Stop()
	}
}

// beginRelease marks a Release as out. From then on only Release reports a
// loss: a renewal or Extend round racing it would find the keys it deletes
// gone and report the hold force-released.
func (h *hold) beginRelease() {
	h.mu.Lock()
	h.releasing = true
	h.mu.Unlock()
}

// finish ends the hold by Release.
func (h *hold) finish() {
	h.stopRenewal()
	h.mu.Lock()
	h.ended = true
	h.mu.Unlock()
}

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
// for an active hold has an effect, and none while a Release is out.
func (h *hold) markLost(reason lock.LossReason, err error) { h.lose(reason, err, false) }

// lose is markLost; byRelease marks the loss Release found, the only one
// reported while a Release is out.
func (h *hold) lose(reason lock.LossReason, err error, byRelease bool) {
	h.mu.Lock()
	if h.ended || (h.releasing && !byRelease) {
		h.mu.Unlock()
		return
	}
	h.ended = true
	h.cause = &lock.LostError{Key: h.l.key, Reason: reason, Err: err}
	if !h.stopped {
		h.stopped = true
		close(h.stop)
	}
	fns, cause := h.onLost, h.cause
	h.onLost = nil
	h.mu.Unlock()

	close(h.lost)
	for _, fn := range fns {
		fn(cause)
	}
	l := h.l
	if o := l.cfg.observer; o != nil {
		o.Observe(lock.Event{Kind: lock.EventLost, Key: l.key, Token: h.token, Fence: h.fence, Err: cause})
	}
	if lg := l.cfg.logger; lg != nil {
		lg.Warn("redlock lost", slog.String("key", l.key), slog.String("reason", reason.String()),
			slog.Int64("fence", h.fence), slog.Any("err", err))
	}
}

// abandon arms the timer that reports h lost when its validity runs out,
// renewal having stopped (Close).
func (h *hold) abandon() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended || h.afterFn != nil {
		return
	}
	h.afterFn = time.AfterFunc(time.Until(h.validUntil), func() {
		h.markLost(lock.LossExpired, lock.ErrClosed)
	})
}
