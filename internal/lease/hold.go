package lease

import (
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Hold is one acquisition of a lock: from a successful attempt until
// Release or loss. A handle acquired again gets a new Hold.
//
// Every held lock has one, so its size counts (S7 holds 100 000 per
// Client): it keeps what every hold uses, in 112 bytes, and its extra
// (holdExtra) what few do, made on first use.
type Hold struct {
	hd    *Handle
	token string
	fence int64
	since int64 // when the acquire that made it was sent (mono); MaxHold counts from it

	relMu sync.Mutex // serializes Releases of this hold
	mu    sync.Mutex
	x     atomic.Pointer[holdExtra] // nil until first needed (more)

	// The hold's term: its renewal state, guarded by its Engine's mu. Times
	// are clock readings (see mono). A write is an acquire, renewal or
	// Extend call; see Engine.extending for the rules that keep deadline
	// safe while writes with different TTLs overlap.
	ttl       time.Duration // what renewals send
	sentAt    int64         // when the write that set deadline was sent
	deadline  int64         // lost if no write confirms the hold again by then
	settledAt int64         // when the last renewal or Extend reply (or failure) came
	next      int64         // when the renewal loop looks at this hold again
	index     int32         // position in the renewal heap; -1 when not in it

	inFlight   bool // a renewal call for it is under way (Engine's mu)
	registered bool // known to the renewal loop (Engine's mu)
	ended      bool // released or lost; nothing more to report (mu)
	releasing  bool // a Release is out: only its own answer may report a loss (mu)
}

// holdExtra is the part of a Hold that most holds never need: loss
// reporting beyond the ended flag, Extend and renewal-failure bookkeeping.
// A Hold makes it on first use (Hold.more) and keeps it.
type holdExtra struct {
	// Guarded by the Hold's mu.
	lost    chan struct{} // made on first use; closed when the hold ends involuntarily
	cause   error         // the kind's *LostError, set when lost
	onLost  []func(error) // called once with the cause
	onEnd   []func()      // called once when the hold ends, released or lost
	afterFn *time.Timer   // the deadline timer a Close leaves behind

	// Guarded by the Engine's mu: the rest of the term.
	extending int32 // Extend calls out
	lastErr   error // the last renewal error, cleared by a success
	// ttlCap is the shortest TTL of the writes whose outcome is unknown
	// (failed after they may have been sent, or unanswered): any of them
	// may still land, after later writes, and set that TTL. Every deadline
	// counts on no more than it, and renewals come at a third of it (still
	// sending ttl). 0: none. Never lifted within a hold.
	ttlCap time.Duration
	// extDeadline is the earliest deadline of the Extends that may still
	// land after the renewal in flight (or the next one): those out, and
	// those answered while it was out. never = none.
	extDeadline int64
	// owed: a force message for the hold may have been missed, so the
	// renewal loop asks Redis about it at once, and again until a write
	// sent at checkFrom or later is confirmed (Engine.owe).
	owed      bool
	checkFrom int64
	// forced: a force message named the hold before it was installed; it
	// is reported lost once its acquire is (Handle.settle).
	forced bool
	// reused: an earlier call of its acquisition, of unknown outcome, may
	// have set its token in Redis (install), so a force message naming it
	// may be for that earlier hold. named: one came after its acquire was
	// sent; it is asked about in Redis instead, and a loss that check finds
	// is reported as force-released (screen, Engine.named).
	reused, named bool
}

// more returns h's extra, making it on first use. Callers hold h.mu or the
// Engine's mu, whichever guards the fields they touch.
func (h *Hold) more() *holdExtra {
	if x := h.x.Load(); x != nil {
		return x
	}
	x := &holdExtra{extDeadline: never}
	if h.x.CompareAndSwap(nil, x) {
		return x
	}
	return h.x.Load()
}

// lastErr is the last renewal error, nil after a success. Callers hold the
// Engine's mu.
func (h *Hold) lastErr() error {
	if x := h.x.Load(); x != nil {
		return x.lastErr
	}
	return nil
}

// capAt is when MaxHold ends the hold: no renewal past it; never without a
// cap.
func (h *Hold) capAt() int64 {
	if m := h.hd.pol.MaxHold; m > 0 {
		return later(h.since, m)
	}
	return never
}

// newHold makes the hold of token on hd, confirmed by a write sent at sent.
func newHold(hd *Handle, token string, fence int64, sent time.Time) *Hold {
	p := hd.pol
	h := &Hold{hd: hd, token: token, fence: fence, since: mono(sent)}
	h.ttl = p.TTL
	h.sentAt = mono(sent)
	h.settledAt = math.MinInt64 // the acquire's reply came before any other call
	h.index = -1
	h.deadline = p.deadlineFor(h.sentAt, h.ttl)
	return h
}

// capped returns ttl bounded by the hold's ttlCap. Callers hold the
// Engine's mu.
func (h *Hold) capped(ttl time.Duration) time.Duration {
	if x := h.x.Load(); x != nil && x.ttlCap > 0 {
		return min(ttl, x.ttlCap)
	}
	return ttl
}

// unknownWrite records a write of ttl whose outcome is unknown: it may land
// later. Callers hold the Engine's mu.
func (h *Hold) unknownWrite(ttl time.Duration) {
	if x := h.more(); x.ttlCap == 0 || ttl < x.ttlCap {
		x.ttlCap = ttl
	}
}

// deadlineFor is the safety deadline of a write of ttl sent at sent.
func (p *Policy) deadlineFor(sent int64, ttl time.Duration) int64 {
	return later(sent, ttl-p.Margin(ttl))
}

// Handle returns the handle h belongs to.
func (h *Hold) Handle() *Handle { return h.hd }

// Token returns the token h holds the lock with: for a re-entrant hold its
// own id, not the owner id.
func (h *Hold) Token() string { return h.token }

// Fence returns h's fencing token.
func (h *Hold) Fence() int64 { return h.fence }

// closedChan is what Lost returns for a hold lost before anyone asked.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Lost returns the channel closed when h is lost. It is made on first use:
// most holds end without anyone selecting on it.
func (h *Hold) Lost() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	x := h.more()
	if x.lost == nil {
		if x.cause != nil {
			return closedChan
		}
		x.lost = make(chan struct{})
	}
	return x.lost
}

// Active reports whether the hold has neither been released nor lost.
func (h *Hold) Active() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.ended
}

// givenUp reports whether the hold is no longer its owner's: reported lost,
// or a Release of it begun, whatever that Release's outcome.
func (h *Hold) givenUp() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ended || h.releasing
}

// LostErr returns the loss, or nil while the hold is not lost.
func (h *Hold) LostErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cause()
}

// cause is the loss, nil while the hold is not lost. Callers hold h.mu.
func (h *Hold) cause() error {
	if x := h.x.Load(); x != nil {
		return x.cause
	}
	return nil
}

// OnLost registers fn to be called with the loss; at once if the hold is
// already lost.
func (h *Hold) OnLost(fn func(error)) {
	h.mu.Lock()
	if cause := h.cause(); cause != nil {
		h.mu.Unlock()
		fn(cause)
		return
	}
	x := h.more()
	x.onLost = append(x.onLost, fn)
	h.mu.Unlock()
}

// OnEnd registers fn to be called once when h ends, released or lost
// (before Lost closes); at once if it has ended.
func (h *Hold) OnEnd(fn func()) {
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		fn()
		return
	}
	x := h.more()
	x.onEnd = append(x.onEnd, fn)
	h.mu.Unlock()
}

// takeOnEnd returns the OnEnd functions, which the hold's end runs.
// Callers hold h.mu and have just ended h.
func (h *Hold) takeOnEnd() []func() {
	x := h.x.Load()
	if x == nil {
		return nil
	}
	fns := x.onEnd
	x.onEnd = nil
	return fns
}

// runOnEnd runs fns, the OnEnd functions of an ended hold.
func runOnEnd(fns []func()) {
	for _, fn := range fns {
		fn()
	}
}

// beginRelease marks a Release as out; it reports whether the hold had
// already ended (released or lost).
func (h *Hold) beginRelease() (ended bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.releasing = true
	return h.ended
}

// finish ends the hold by Release.
func (h *Hold) finish() {
	h.mu.Lock()
	if x := h.x.Load(); x != nil && x.afterFn != nil {
		x.afterFn.Stop()
	}
	ended := h.ended
	h.ended, h.releasing = true, false
	var onEnd []func()
	if !ended {
		onEnd = h.takeOnEnd()
	}
	h.mu.Unlock()
	if !ended { // a loss took it off already
		h.unlisten()
		runOnEnd(onEnd)
	}
}

// markLost is the one place a loss is signalled: it closes Lost(), cancels
// WithLock's context, tells the Observer and the logger. Only the first call
// for an active hold has an effect.
func (h *Hold) markLost(reason Reason, err error) { h.lose(reason, err, false) }

// lose is markLost; byRelease marks the loss Release found, the only one
// reported while a Release is out (an Extend racing it would otherwise see
// the key it deletes gone).
func (h *Hold) lose(reason Reason, err error, byRelease bool) {
	p := h.hd.pol
	h.mu.Lock()
	if h.ended || (h.releasing && !byRelease) {
		h.mu.Unlock()
		return
	}
	h.ended = true
	x := h.more()
	x.cause = p.Lost(h.hd.Keys.User, reason, err)
	fns := x.onLost
	x.onLost = nil
	onEnd := h.takeOnEnd()
	cause := x.cause
	ch := x.lost
	h.mu.Unlock()
	h.unlisten()
	runOnEnd(onEnd) // whoever reacts to Lost() finds them run

	// Lost() closes and the callbacks run even if the Observer or the
	// logger panics.
	defer func() {
		if ch != nil {
			close(ch)
		}
		for _, fn := range fns {
			fn(cause)
		}
	}()
	// The Observer and the log first: whoever reacts to Lost() finds the
	// loss already reported.
	p.observe(h.hd.Keys.User, Event{Kind: EventLost, Token: h.token, Fence: h.fence, Err: cause, Held: h.heldUntil(time.Now())})
	if lg := p.Logger; lg != nil {
		lg.Warn(p.Pkg+" lost", slog.String("key", h.hd.Keys.User), slog.String("reason", reason.String()),
			slog.Int64("fence", h.fence), slog.Any("err", cause))
	}
}

// lossReason names why Redis no longer has a hold of ttl confirmed by a
// write sent at sentAt: someone else's token, a force release, or no key
// at all (expired by our clock, or vanished while it should have been
// valid: deleted, or Redis lost its data).
func lossReason(st Status, now int64, ttl time.Duration, sentAt int64) Reason {
	switch {
	case st == Stolen:
		return LossStolen
	case st == Forced:
		return LossForceReleased
	case between(sentAt, now) >= ttl:
		return LossExpired
	}
	return LossVanished
}

// abandon arms the timer that reports h lost at its deadline, renewal
// having stopped (Close).
func (h *Hold) abandon(deadline int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return
	}
	x := h.more()
	if x.afterFn != nil {
		return
	}
	x.afterFn = time.AfterFunc(untilMono(deadline), func() {
		defer h.hd.pol.Engine.Survive("loss report")
		h.markLost(LossExpired, ErrClosed)
	})
}
