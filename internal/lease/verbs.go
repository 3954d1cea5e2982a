package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

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
	var pass GatePass
	if p.Gate != nil {
		if pass, err = p.Gate.Enter(hd, false); err != nil {
			return false, err
		}
		defer hd.leaveGate(pass, hd.Hold())
	}
	// The clock is read, and events made, only for an Observer: without
	// one they cost a lone caller more than the library's other work.
	obs := p.Observe != nil
	var start time.Time
	if obs {
		start = time.Now()
		p.observe(hd.Keys.User, Event{Kind: EventAcquireStart, Ctx: ctx})
	}
	a, h, _ := hd.attempt(ctx, k, token, pass, false)
	switch {
	case h != nil:
		if obs {
			hd.observeHeld(k, h, Event{Kind: EventAcquire, Ctx: ctx, Token: token, Fence: h.fence, Duration: time.Since(start), Attempts: 1})
		}
		hd.settle(h)
		return true, nil
	case a.Err == nil:
		if obs {
			p.observe(hd.Keys.User, Event{Kind: EventAcquire, Ctx: ctx, Token: token, Duration: time.Since(start), Attempts: 1, Err: ErrNotAcquired})
		}
		return false, nil
	}
	if a.Unknown {
		hd.undo(ctx, k, token)
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
	var start time.Time
	if p.Observe != nil {
		start = time.Now()
	}
	e.remove(h)
	// A hold that already ended (released, lost, or a Release whose outcome
	// was unknown) is still asked about: its token names this hold alone,
	// re-entrant or not, so whatever is left of it goes and nobody else's
	// is touched. If it is gone, no loss is reported (lose ignores an ended
	// hold): our own earlier release may have removed it.
	ended := h.beginRelease()
	o := hd.release(ctx, k, h, ended)
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
	if p.Observe != nil {
		end := time.Now()
		p.observe(hd.Keys.User, Event{Kind: EventRelease, Ctx: ctx, Token: h.token, Fence: h.fence, Duration: end.Sub(start), Err: err, Held: h.heldUntil(end)})
	}
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
	begun := time.Now() // the call's; start is when the Extend is sent
	start, err := hd.beginExtend(ctx, h, ttl)
	if err != nil {
		return err
	}
	o, settled, cut := hd.extend(ctx, k, h, ttl, start)
	if cut {
		// Unanswered by the caller's deadline: it may land later, after
		// writes not yet sent (see ttlCap).
		e.mu.Lock()
		h.unknownWrite(ttl)
		e.mu.Unlock()
		err := hd.Err("extend", unanswered(ctx))
		p.observe(hd.Keys.User, Event{Kind: EventExtend, Ctx: ctx, Token: h.token, Fence: h.fence, Duration: time.Since(begun), Err: err})
		return err
	}
	e.settleExtend(h, ttl, start, o, settled)
	switch o.Status {
	case Failed:
		err = hd.Err("extend", o.Err)
	case Confirmed:
		// Answered after the hold was given up (its deadline, lowered when
		// this call went out, passed first, or a Release began): nothing
		// renews the hold now, and what this call extended is nobody's.
		err = hd.NotHeld("extend", h)
	default:
		err = hd.Err("extend", ErrNotHeld)
	}
	p.observe(hd.Keys.User, Event{Kind: EventExtend, Ctx: ctx, Token: h.token, Fence: h.fence, Duration: time.Since(begun), Err: err})
	return err
}

// beginExtend records an Extend of h to ttl as sent now (Engine.extending)
// and returns that time, once no renewal of h is out: one sent before the
// Extend and landing after it would set the old TTL again, so the Extend
// waits for its answer, which the renewal call's own deadline bounds. It
// returns an error wrapping ErrNotHeld when h is released or lost first,
// or one matching ctx's cause when ctx ends first, nothing sent; an
// Extend that waited and then failed so is reported to the Observer.
func (hd *Handle) beginExtend(ctx context.Context, h *Hold, ttl time.Duration) (time.Time, error) {
	e := hd.pol.Engine
	var waited time.Time
	for {
		err := hd.NotHeld("extend", h)
		if err == nil {
			start := time.Now()
			wait := e.extending(h, ttl, start)
			if wait == nil {
				return start, nil
			}
			if waited.IsZero() {
				waited = start
			}
			if f := e.extendWaits; f != nil {
				f()
			}
			select {
			case <-wait:
				continue
			case <-h.Lost():
				continue
			case <-ctx.Done():
				err = hd.Err("extend", context.Cause(ctx))
			}
		}
		// Released (or a Release begun), or declared lost: extending now
		// would revive a hold nobody renews.
		if !waited.IsZero() {
			hd.pol.observe(hd.Keys.User, Event{Kind: EventExtend, Ctx: ctx, Token: h.token, Fence: h.fence, Duration: time.Since(waited), Err: err})
		}
		return time.Time{}, err
	}
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
	case o.Status == Gone || o.Status == Stolen || o.Status == Forced:
		e.lose(h, o.Status, false)
	case settled != nil:
		e.background(func() {
			<-settled
			e.extended(h, ttl, sent, o.Status == Confirmed, o.Unknown)
		})
	default:
		e.extended(h, ttl, sent, o.Status == Confirmed, o.Unknown)
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

// extend sends k's Extend of h to ttl, begun at start: on the caller's
// goroutine, or, when ctx's deadline must bound it, on one of the
// Engine's (runBounded); cut when ctx ended first, the Extend then settled
// in the background once it returns. If the call panics while the caller
// waits (a go-redis hook, say; runBounded hands such a panic back), the
// Extend is settled as a write of unknown outcome, which may still land,
// before the panic goes on to the caller: an Extend left counted as out
// would keep every later renewal from moving the hold's deadline past the
// one this Extend set.
func (hd *Handle) extend(ctx context.Context, k Kind, h *Hold, ttl time.Duration, start time.Time) (o Outcome, settled <-chan struct{}, cut bool) {
	e := hd.pol.Engine
	defer fixOnPanic(func(v any) {
		e.settleExtend(h, ttl, start, Outcome{Err: fmt.Errorf("%w: %v", ErrPanicked, v), Unknown: true}, nil)
	})
	if !hd.bounded(ctx) {
		o, settled = k.Extend(ctx, h, ttl)
		return o, settled, false
	}
	type result struct {
		o       Outcome
		settled <-chan struct{}
	}
	r, ok := runBounded(e, ctx, func() result {
		o, settled := k.Extend(ctx, h, ttl)
		return result{o, settled}
	}, func(r result, panicked error) {
		if panicked != nil {
			r.o = Outcome{Err: panicked, Unknown: true}
		}
		e.settleExtend(h, ttl, start, r.o, r.settled)
	})
	return r.o, r.settled, !ok
}

// release sends k's Release of h: on the caller's goroutine, or, when
// ctx's deadline must bound it, on one of the Engine's (runBounded), its
// outcome unknown when ctx ends first. If the call panics while the caller
// waits (a go-redis hook, say; runBounded hands such a panic back), h is
// ended as by a Release whose outcome is unknown, which expires by its
// TTL, before the panic goes on to the caller: the handle can then acquire
// again, and the hold leaves its force channel.
func (hd *Handle) release(ctx context.Context, k Kind, h *Hold, ended bool) Outcome {
	defer fixOnPanic(func(any) { h.finish() })
	if !hd.bounded(ctx) {
		return k.Release(ctx, h, ended)
	}
	o, ok := runBounded(hd.pol.Engine, ctx, func() Outcome { return k.Release(ctx, h, ended) }, nil)
	if !ok {
		return Outcome{Err: unanswered(ctx)}
	}
	return o
}
