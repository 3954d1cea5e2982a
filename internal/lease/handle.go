package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentlock/lock/internal/luascripts"
)

// Handle is the engine's part of one lock handle; a kind's Lock embeds it
// and calls Init (or Fail). Its verbs are safe on a nil or zero Handle:
// they return an error wrapping ErrInvalid. Its methods are safe for concurrent use, but one handle
// holds the lock at most once at a time.
type Handle struct {
	Keys luascripts.Keys // the lock's keys; Keys.User is the caller's key
	pol  *Policy         // nil on the handle of a zero Lock, or one that failed
	err  error           // the configuration error, returned by every verb

	mu   sync.Mutex
	busy bool  // an Acquire or TryAcquire is under way
	h    *Hold // the current or last hold; nil before the first
}

// Init makes hd a handle on keys under pol.
func (hd *Handle) Init(pol *Policy, keys luascripts.Keys) {
	hd.pol, hd.Keys = pol, keys
}

// Fail makes hd the handle of a lock on key that cannot be used: every
// verb returns err.
func (hd *Handle) Fail(key string, err error) {
	hd.Keys.User, hd.err = key, err
}

// errZeroLock is what every verb of a zero or nil Lock returns.
var errZeroLock = Invalidf("zero Lock: make locks with Client.NewLock")

// Usable returns the error every verb returns before it does anything: the
// configuration error, or one wrapping ErrInvalid for a nil handle or one
// never set up (a zero Lock), which touch nothing.
func (hd *Handle) Usable() error {
	switch {
	case hd == nil:
		return errZeroLock
	case hd.err != nil:
		return hd.err
	case hd.pol == nil:
		return errZeroLock
	}
	return nil
}

// Key returns the caller's key; "" on a nil handle.
func (hd *Handle) Key() string {
	if hd == nil {
		return ""
	}
	return hd.Keys.User
}

// Policy returns the handle's policy.
func (hd *Handle) Policy() *Policy { return hd.pol }

// Hold returns the current or last hold; nil before the first, and on a
// nil handle.
func (hd *Handle) Hold() *Hold {
	if hd == nil {
		return nil
	}
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return hd.h
}

// Token returns the token of the current or last hold as callers see it:
// the owner id for a re-entrant hold. "" before the first. Like every
// accessor of a Handle, it is safe on a nil one.
func (hd *Handle) Token() string {
	if h := hd.Hold(); h != nil {
		return hd.pol.publicToken(h.token)
	}
	return ""
}

// Fence returns the fence of the current or last hold; 0 before the first.
func (hd *Handle) Fence() int64 {
	if h := hd.Hold(); h != nil {
		return h.fence
	}
	return 0
}

// Lost returns the Lost channel of the current hold; nil (a channel that
// never closes) before the first.
func (hd *Handle) Lost() <-chan struct{} {
	if h := hd.Hold(); h != nil {
		return h.Lost()
	}
	return nil
}

// LostErr returns the loss of the current hold, or nil.
func (hd *Handle) LostErr() error {
	if h := hd.Hold(); h != nil {
		return h.LostErr()
	}
	return nil
}

// Left returns how long the current hold stays valid: 0 before the first,
// and once it ended or its safety deadline passed.
func (hd *Handle) Left() time.Duration {
	if h := hd.Hold(); h != nil {
		return hd.pol.Engine.Left(h)
	}
	return 0
}

// Err returns the error of verb op on the handle's key.
func (hd *Handle) Err(op string, errs ...error) error {
	return NewOpError(hd.pol.Pkg, op, hd.Keys.User, errs...)
}

// Lose takes h out of renewal and reports it lost: Redis said st of it
// (Gone or Stolen) when a kind's own call asked.
func (hd *Handle) Lose(h *Hold, st Status) { hd.pol.Engine.lose(h, st, false) }

// begin checks that an acquisition may start and marks the handle busy.
func (hd *Handle) begin() error {
	if err := hd.Usable(); err != nil {
		return err
	}
	if hd.pol.Engine.Closed() {
		return hd.Err("acquire", ErrClosed)
	}
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.busy {
		return hd.Err("acquire", Invalidf("another acquisition on this handle is under way"))
	}
	if hd.h != nil && hd.h.Active() {
		return hd.Err("acquire", Invalidf("already held by this handle; release it first"))
	}
	hd.busy = true
	return nil
}

func (hd *Handle) done() {
	hd.mu.Lock()
	hd.busy = false
	hd.mu.Unlock()
}

// errLateReply fails an attempt whose success was confirmed only after the
// hold's safety deadline. It wraps ErrNotAcquired; Acquire retries it.
var errLateReply = fmt.Errorf("%w: reply arrived after the lease's safety deadline", ErrNotAcquired)

// install makes token's hold, confirmed by a call sent at sent, the
// handle's current hold and puts it into renewal. A reply so late that the
// lease may already have run out in Redis is not a hold: install returns
// errLateReply, and the caller undoes the attempt.
func (hd *Handle) install(token string, fence int64, sent time.Time) (*Hold, error) {
	h := newHold(hd, token, fence, sent)
	if monoNow() >= h.deadline {
		return nil, errLateReply
	}
	hd.pol.Engine.add(h)
	hd.mu.Lock()
	hd.h = h
	hd.mu.Unlock()
	return h, nil
}

// undo removes what an attempt with token may have set, on a goroutine of
// the Engine bounded by Policy.UndoTimeout, and waits for it until wait is
// done (a nil wait: not at all).
func (hd *Handle) undo(k Kind, token string, wait <-chan struct{}) {
	done := make(chan struct{})
	hd.pol.Engine.background(func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), hd.pol.UndoTimeout)
		defer cancel()
		k.Undo(ctx, token)
	})
	if wait != nil {
		select {
		case <-done:
		case <-wait:
		}
	}
}

// attempt makes one attempt with token and installs the hold it takes. An
// attempt whose outcome is unknown is returned as such (Unknown); one the
// caller's deadline cut short is settled in the background, undone once
// its call returns if it may have taken the lock. held is the new hold.
func (hd *Handle) attempt(ctx context.Context, k Kind, token string) (a Attempt, held *Hold, cut bool) {
	if hd.bounded(ctx) {
		var ok bool
		a, ok = runBounded(hd.pol.Engine, ctx, func() Attempt { return k.Try(ctx, token) }, func(a Attempt) {
			if a.OK || a.Unknown {
				hd.undo(k, token, nil)
			}
		})
		if !ok {
			return Attempt{Err: unanswered(ctx)}, nil, true
		}
	} else {
		a = k.Try(ctx, token)
	}
	if !a.OK {
		return a, nil, false
	}
	h, err := hd.install(token, a.Fence, a.Sent)
	if err != nil {
		hd.undo(k, token, ctx.Done())
		return Attempt{Err: err}, nil, false
	}
	return a, h, false
}

// TryAcquire makes one attempt: (true, nil) when the lock is now held,
// (false, nil) when someone else holds it, (false, err) on failure. What a
// failed attempt may have set is undone in the background; TryAcquire waits
// for that until ctx is done.
func (hd *Handle) TryAcquire(ctx context.Context, k Kind) (bool, error) {
	if err := hd.begin(); err != nil {
		return false, err
	}
	defer hd.done()
	p := hd.pol
	token, err := k.Token()
	if err != nil {
		return false, hd.Err("acquire", err)
	}
	start := time.Now()
	p.observe(hd.Keys.User, Event{Kind: EventAcquireStart, Ctx: ctx})
	a, h, _ := hd.attempt(ctx, k, token)
	switch {
	case h != nil:
		p.observe(hd.Keys.User, Event{Kind: EventAcquire, Ctx: ctx, Token: token, Fence: h.fence, Duration: time.Since(start), Attempts: 1})
		return true, nil
	case a.Err == nil:
		p.observe(hd.Keys.User, Event{Kind: EventAcquire, Ctx: ctx, Token: token, Duration: time.Since(start), Attempts: 1, Err: ErrNotAcquired})
		return false, nil
	}
	if a.Unknown {
		hd.undo(k, token, ctx.Done())
	}
	hd.attemptFailed(ctx, token, 1, 1, a.Err)
	err = hd.Err("acquire", a.Err)
	p.observe(hd.Keys.User, Event{Kind: EventAcquire, Ctx: ctx, Token: token, Duration: time.Since(start), Attempts: 1, Err: err})
	return false, err
}

// Release gives the hold up: it takes it out of renewal, then has the kind
// drop it in Redis. It returns nil when our hold was released; an error
// wrapping ErrNotHeld when Redis no longer had it (the hold is then
// reported lost, if it was not already) or there is none; otherwise the
// call's error: the outcome is then unknown, and the hold expires by its
// TTL if it is still there. A hold that already ended is still asked about,
// so a second Release touches nothing of anyone else's.
func (hd *Handle) Release(ctx context.Context, k Kind) error {
	if err := hd.Usable(); err != nil {
		return err
	}
	h := hd.Hold()
	if h == nil {
		return hd.Err("release", ErrNotHeld)
	}
	h.relMu.Lock()
	defer h.relMu.Unlock()
	p, e := hd.pol, hd.pol.Engine
	start := time.Now()
	e.remove(h)
	// A hold that already ended (released, lost, or a Release whose outcome
	// was unknown) is still asked about: its token names this hold alone,
	// re-entrant or not, so whatever is left of it goes and nobody else's
	// is touched. If it is gone, no loss is reported (lose ignores an ended
	// hold): our own earlier release may have removed it.
	ended := h.beginRelease()
	var o Outcome
	if hd.bounded(ctx) {
		var ok bool
		if o, ok = runBounded(e, ctx, func() Outcome { return k.Release(ctx, h, ended) }, nil); !ok {
			o = Outcome{Err: unanswered(ctx)}
		}
	} else {
		o = k.Release(ctx, h, ended)
	}
	var err error
	switch o.Status {
	case Confirmed:
	case Failed:
		err = hd.Err("release", o.Err)
	default:
		e.lose(h, o.Status, true)
		err = hd.Err("release", ErrNotHeld)
	}
	h.finish()
	p.observe(hd.Keys.User, Event{Kind: EventRelease, Ctx: ctx, Token: h.token, Fence: h.fence, Duration: time.Since(start), Err: err})
	return err
}

// Extend sets the hold's TTL to ttl, counted from now, if Redis still has
// it; later renewals keep the new TTL. A shorter TTL brings the hold's
// safety deadline forward before the call is sent, and keeps it there if
// the call fails. It returns an error wrapping ErrClosed after Close, the
// kind's CheckTTL error, ErrNotHeld when the hold ended or Redis no longer
// has it (reporting it lost) or it was lost before the reply came, or the
// call's error.
func (hd *Handle) Extend(ctx context.Context, k Kind, ttl time.Duration) error {
	if err := hd.Usable(); err != nil {
		return err
	}
	p, e := hd.pol, hd.pol.Engine
	if e.Closed() {
		return hd.Err("extend", ErrClosed)
	}
	if err := k.CheckTTL(ttl); err != nil {
		return hd.Err("extend", err)
	}
	h := hd.Hold()
	if h == nil {
		return hd.Err("extend", ErrNotHeld)
	}
	if !h.Active() {
		// Released, or declared lost: extending now would revive a hold
		// nobody renews.
		if lost := h.LostErr(); lost != nil {
			return hd.Err("extend", ErrNotHeld, lost)
		}
		return hd.Err("extend", ErrNotHeld)
	}
	start := time.Now()
	e.extending(h, ttl, start)
	var (
		o       Outcome
		settled <-chan struct{}
	)
	if hd.bounded(ctx) {
		type result struct {
			o       Outcome
			settled <-chan struct{}
		}
		r, ok := runBounded(e, ctx, func() result {
			o, settled := k.Extend(ctx, h, ttl)
			return result{o, settled}
		}, func(r result) { e.settleExtend(h, ttl, start, r.o, r.settled) })
		if !ok {
			err := hd.Err("extend", unanswered(ctx))
			p.observe(hd.Keys.User, Event{Kind: EventExtend, Ctx: ctx, Token: h.token, Fence: h.fence, Duration: time.Since(start), Err: err})
			return err
		}
		o, settled = r.o, r.settled
	} else {
		o, settled = k.Extend(ctx, h, ttl)
	}
	e.settleExtend(h, ttl, start, o, settled)
	var err error
	switch o.Status {
	case Failed:
		err = hd.Err("extend", o.Err)
	case Confirmed:
		if lost := h.LostErr(); lost != nil {
			// Answered after the hold was given up: its deadline, lowered
			// when this call went out, passed first, and nothing renews the
			// hold now.
			err = hd.Err("extend", ErrNotHeld, lost)
		}
	default:
		err = hd.Err("extend", ErrNotHeld)
	}
	p.observe(hd.Keys.User, Event{Kind: EventExtend, Ctx: ctx, Token: h.token, Fence: h.fence, Duration: time.Since(start), Err: err})
	return err
}

// settleExtend records the outcome of an Extend to ttl sent at sent; with
// settled not nil, once settled closes (see Kind.Extend).
func (e *Engine) settleExtend(h *Hold, ttl time.Duration, sent time.Time, o Outcome, settled <-chan struct{}) {
	if settled != nil {
		select {
		case <-settled:
			settled = nil // every call has returned already
		default:
		}
	}
	switch {
	case o.Status == Gone || o.Status == Stolen:
		e.lose(h, o.Status, false)
	case settled != nil:
		e.background(func() {
			<-settled
			e.extended(h, ttl, sent, o.Status == Confirmed)
		})
	default:
		e.extended(h, ttl, sent, o.Status == Confirmed)
	}
}

// unanswered is the error of a call its caller's context cut short: sent,
// outcome unknown.
func unanswered(ctx context.Context) error {
	return &unansweredError{cause: context.Cause(ctx)}
}

type unansweredError struct{ cause error }

func (e *unansweredError) Error() string {
	return "lock: no reply before the call's context ended, outcome unknown: " + Bare(e.cause)
}
func (e *unansweredError) Unwrap() error { return e.cause }

// errWaitTimeout is the cause of a wait that ran out.
var errWaitTimeout = errors.New("lock: wait timeout")
