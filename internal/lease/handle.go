package lease

import (
	"context"
	"fmt"
	"log/slog"
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

// strategy returns how hd's Acquire waits: its Policy's Strategy, Contend
// when that is nil.
func (hd *Handle) strategy() Strategy {
	if hd.pol.Strategy == nil {
		return Contend
	}
	return hd.pol.Strategy
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

// NotHeld returns the error a verb op (Extend, TTL) returns for a hold that
// is no longer its owner's: reported lost, or a Release of it begun,
// whatever that Release's outcome; nil while the hold is live. What a
// failed Release left in Redis is nobody's hold: extending it would make it
// outlive its key's last owner, and a time left on it would read as a hold.
func (hd *Handle) NotHeld(op string, h *Hold) error {
	if lost := h.LostErr(); lost != nil {
		return hd.Err(op, ErrNotHeld, lost)
	}
	if h.givenUp() {
		return hd.Err(op, ErrNotHeld)
	}
	return nil
}

// Lose takes h out of renewal and reports it lost: Redis said st of it
// (Gone, Stolen or Forced) when a kind's own call asked.
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

// Busy reports whether an Acquire or TryAcquire is under way on hd.
func (hd *Handle) Busy() bool {
	if hd == nil {
		return false
	}
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return hd.busy
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
// handle's current hold and puts it into renewal. reused says that an
// earlier call of the same acquisition, of unknown outcome, may have set
// token in Redis before (see screen). A reply so late that the
// lease may already have run out in Redis is not a hold: install returns
// errLateReply, and the caller undoes the attempt.
func (hd *Handle) install(token string, fence int64, sent time.Time, reused bool) (*Hold, error) {
	h := newHold(hd, token, fence, sent)
	if reused {
		h.more().reused = true
	}
	if monoNow() >= h.deadline {
		return nil, errLateReply
	}
	// Counted on its force channel before it enters renewal: from there on
	// it can be lost at any moment (a renewal finds the key gone; a force
	// message names it), and its loss takes it off the channel, which must
	// find it counted. A force message that came before add registered it
	// is found there (screen, force.go).
	var cs *channelState
	if hd.pol.Inbox != "" {
		cs = hd.pol.Engine.Notifier.listen(hd.pol.Inbox)
	}
	hd.pol.Engine.add(h, cs)
	if f := hd.pol.Engine.installed; f != nil {
		f(h)
	}
	hd.mu.Lock()
	hd.h = h
	hd.mu.Unlock()
	return h, nil
}

// undo removes what an attempt with token may have set, on a goroutine of
// the Engine bounded by Policy.UndoTimeout (undoLater), and waits for it
// until ctx is done.
func (hd *Handle) undo(ctx context.Context, k Kind, token string) {
	done := hd.undoLater(k, token)
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// undoLater starts the undo of an attempt made with token on a goroutine
// of the Engine, bounded by Policy.UndoTimeout, and returns a channel
// closed once it is done; nobody waits for it but Close.
func (hd *Handle) undoLater(k Kind, token string) <-chan struct{} {
	done := make(chan struct{})
	hd.pol.Engine.background(func() {
		defer close(done)
		hd.undoNow(k, token)
	})
	return done
}

// undoNow undoes an attempt made with token on the calling goroutine,
// bounded by Policy.UndoTimeout: for a goroutine of the Engine that Close
// already waits for, such as a cut attempt's settling, so that the undo
// has reached Redis when Close returns.
func (hd *Handle) undoNow(k Kind, token string) {
	defer hd.undoPanicked()
	uctx, cancel := context.WithTimeout(context.Background(), hd.pol.UndoTimeout)
	defer cancel()
	k.Undo(uctx, token)
}

// undoPanicked, deferred by an undo, recovers a panic of its call (a
// go-redis hook, say) and logs it as the undo's failure: what the attempt
// may have set is left to expire with its TTL.
func (hd *Handle) undoPanicked() {
	if v := recover(); v != nil {
		Recovered(hd.pol.Engine.Logger, "undo", v, slog.String("key", hd.Keys.User))
	}
}

// attempt makes one attempt with token and installs the hold it takes. An
// attempt whose outcome is unknown is returned as such (Unknown); one the
// caller's deadline cut short is settled in the background, undone once
// its call returns if it may have taken the lock or, for the FIFO
// strategy, joined the queue (Strategy.undoCut). held is the new hold. An
// attempt that pass, when not nil, does not let through is not sent: it
// finds the lock held. reused is as for install.
func (hd *Handle) attempt(ctx context.Context, k Kind, token string, pass GatePass, reused bool) (a Attempt, held *Hold, cut bool) {
	if pass != nil && !pass.Open() {
		return Attempt{}, nil, false
	}
	if a, cut = hd.try(ctx, k, token); cut {
		return Attempt{Err: unanswered(ctx)}, nil, true
	}
	if !a.OK {
		return a, nil, false
	}
	h, err := hd.install(token, a.Fence, a.Sent, reused)
	if err != nil {
		hd.undo(ctx, k, token)
		return Attempt{Err: err, Spent: true}, nil, false
	}
	return a, h, false
}

// try makes k's attempt with token: on the caller's goroutine, or, when
// ctx's deadline must bound it, on one of the Engine's (runBounded); cut
// when ctx ended first. If the call panics while the caller waits (a
// go-redis hook, say; runBounded hands such a panic back), the attempt
// may have been sent and taken the lock: it is undone in the background,
// as any attempt of unknown outcome, before the panic goes on to the
// caller.
func (hd *Handle) try(ctx context.Context, k Kind, token string) (a Attempt, cut bool) {
	defer fixOnPanic(func(any) { hd.undoLater(k, token) })
	if !hd.bounded(ctx) {
		return k.Try(ctx, token), false
	}
	a, ok := runBounded(hd.pol.Engine, ctx, func() Attempt { return k.Try(ctx, token) }, func(a Attempt, panicked error) {
		// Only now is the call's outcome known: an undo sent before
		// it could run in Redis ahead of the attempt it undoes. One
		// that panicked may have been sent.
		if hd.strategy().undoCut(a, panicked) {
			// On the call's goroutine, which Close waits for: an undo
			// handed to a goroutine of its own after Close began would
			// be left out of that wait.
			hd.undoNow(k, token)
		}
	})
	return a, !ok
}

// observeHeld tells the Observer of e, the acquisition of h by k. If the
// Observer panics (on the caller's goroutine), the caller never learns it
// holds the lock and will not release it: h is ended and undone in the
// background, as an attempt of unknown outcome is, before the panic goes
// on, rather than renewed until Close.
func (hd *Handle) observeHeld(k Kind, h *Hold, e Event) {
	defer fixOnPanic(func(any) {
		hd.pol.Engine.remove(h)
		h.finish()
		hd.undoLater(k, h.token)
	})
	hd.pol.observe(hd.Keys.User, e)
}
