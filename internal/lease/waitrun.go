package lease

import (
	"context"
	"errors"
	"time"
)

// waitRun is the state of one Acquire's wait loop (Handle.wait): what its
// attempts left behind, which decides what the next one carries and what
// the wait's end undoes.
type waitRun struct {
	hd        *Handle
	k         Kind
	s         Strategy
	ctx, wctx context.Context // the caller's; the wait's, ending with Policy.Wait
	pass      GatePass
	token     string // the next attempt's, or the last one's
	attempts  int
	unknown   bool  // an attempt failed after it may have reached Redis
	tried     bool  // an attempt went out with token (FIFO: it may wait in the queue)
	lastErr   error // the last failed attempt's error
	fails     int   // failed attempts in a row
	timer     *time.Timer
	w         *Waiter
}

// open joins the key's waiters before the first attempt when the strategy
// says so, and reports whether that attempt goes out at once anyway.
func (r *waitRun) open() (attemptNow bool) {
	p := r.hd.pol
	if !p.Notify {
		return false
	}
	listen, now := r.s.open(&p.Engine.Notifier, r.hd.Keys.Notify())
	if listen {
		// Listening by then, an attempt that fails needs no second look
		// unless the subscription is confirmed only after it went out
		// (the confirmation wakes the waiter).
		r.w, _ = p.Engine.Notifier.join(r.hd.Keys.Notify(), r.hd, r.k, r.token, false)
	}
	return now
}

// round is one turn of the loop: a handed-over hold, if one came, and
// otherwise one attempt, when mayAttempt (or nobody listens) and no
// release has claimed the waiter. It returns the hold taken, the holder's
// remaining TTL when the lock was found held, or the error that ends the
// wait.
func (r *waitRun) round(mayAttempt bool) (*Hold, time.Duration, error) {
	if r.hd.pol.Engine.Closed() {
		return nil, 0, ErrClosed
	}
	if h, err := r.gift(); h != nil || err != nil {
		return h, 0, err
	}
	if !(mayAttempt || r.w == nil) || !r.w.beginAttempt() {
		return nil, 0, nil
	}
	return r.attempt()
}

// gift installs a hold a release in this process handed the waiter, if
// any.
func (r *waitRun) gift() (*Hold, error) {
	g, ok := r.w.takeGift()
	if !ok {
		return nil, nil
	}
	if g.Retry {
		// The handoff may have set our token in Redis: if we give up
		// before an attempt of ours finds out, it must be undone.
		r.unknown = r.unknown || g.Unknown
		return nil, nil
	}
	// While the gate is closed (a degraded hold of the key is live in
	// this process), a hold handed over by a release of a lock outside
	// the gate is refused, as an attempt would not have been sent.
	if r.pass == nil || r.pass.Open() {
		h, ierr := r.hd.install(r.token, g.Fence, g.Sent, r.unknown)
		if ierr == nil {
			return h, nil
		}
		r.lastErr = ierr
	}
	// Refused: undo it, which spends the token; the waiter gets a fresh
	// one before it is claimable again.
	r.hd.undo(r.wctx, r.k, r.token)
	r.unknown, r.tried = false, false
	err := r.hd.respend(r.k, r.w, &r.token)
	r.w.endAttempt()
	return nil, err
}

// attempt makes one attempt, the waiter marked attempting.
func (r *waitRun) attempt() (*Hold, time.Duration, error) {
	token, err := r.s.token(r.k, r.token, false)
	if err != nil {
		r.w.endAttempt()
		return nil, 0, err
	}
	r.token = token
	r.attempts++
	r.tried = true
	shares := r.s.shares()
	a, held, cut := r.hd.attempt(r.wctx, r.k, r.token, r.pass, r.unknown && shares)
	if (a.Spent || cut) && shares {
		if err := r.respent(cut); err != nil {
			r.w.endAttempt()
			return nil, 0, err
		}
	}
	if held != nil {
		return held, 0, nil
	}
	r.w.endAttempt()
	pttl, err := r.found(a, cut)
	return nil, pttl, err
}

// respent replaces the token after an undo of it was sent, or will be once
// a cut call returns: it may land late, after a later attempt took the
// key, so the attempts that follow carry a fresh token, given to the
// waiter before it is claimable again. An earlier attempt of unknown
// outcome is undone with the old token now, unless the cut call's own
// undo is certain (Strategy.undoCut).
func (r *waitRun) respent(cut bool) error {
	if cut && r.unknown && !r.s.undoCut(Attempt{}, nil) {
		r.hd.undoLater(r.k, r.token)
	}
	r.unknown, r.tried = false, false
	return r.hd.respend(r.k, r.w, &r.token)
}

// found takes in what a failed attempt found: the holder's remaining TTL,
// or the error that ends the wait.
func (r *waitRun) found(a Attempt, cut bool) (time.Duration, error) {
	switch {
	case a.Done:
		return 0, ErrDone
	case a.Err == nil:
		r.fails = 0
		return a.PTTL, nil
	case cut:
		// The wait ended during the call: it is settled in the
		// background. No reply is all we know of Redis.
		if r.lastErr == nil {
			r.lastErr = a.Err
		}
		r.failed(a.Err)
		return 0, nil
	}
	r.unknown = r.unknown || a.Unknown
	if r.wctx.Err() != nil && errors.Is(a.Err, r.wctx.Err()) {
		return 0, nil // the wait's own end: nothing learnt of Redis
	}
	r.lastErr = a.Err
	r.failed(a.Err)
	if a.Final && r.wctx.Err() == nil {
		return 0, a.Err
	}
	return 0, nil
}

// failed reports a failed attempt.
func (r *waitRun) failed(err error) {
	r.fails++
	r.hd.attemptFailed(r.ctx, r.token, r.attempts, r.fails, err)
}

// listen joins the key's waiters after a failed attempt, unless the wait
// listens already or wake-ups are off. It reports that the subscription
// was confirmed only now, after an attempt that found the lock held: a
// release in between would be missed, so the loop looks once more.
func (r *waitRun) listen(pttl time.Duration) (again bool) {
	p := r.hd.pol
	if r.w != nil || !p.Notify {
		return false
	}
	var ready bool
	r.w, ready = p.Engine.Notifier.join(r.hd.Keys.Notify(), r.hd, r.k, r.token, pttl > 0)
	return ready && pttl > 0
}

// sleep waits out the n-th backoff, never past pttl when known, cut short
// by a wake-up or Close. It reports whether the wait goes on.
func (r *waitRun) sleep(n int, pttl time.Duration) bool {
	p := r.hd.pol
	d := Backoff(p.BackoffMin, p.BackoffMax, n)
	if pttl > 0 && pttl < d {
		d = pttl
	}
	if r.timer == nil {
		r.timer = time.NewTimer(d)
	} else {
		r.timer.Reset(d)
	}
	select {
	case <-r.w.wake():
	case <-r.timer.C:
	case <-r.wctx.Done():
	case <-p.Engine.ctx.Done():
	}
	return r.wctx.Err() == nil
}

// stopTimer stops the backoff timer, if one was made.
func (r *waitRun) stopTimer() {
	if r.timer != nil {
		r.timer.Stop()
	}
}

// giveUp ends a wait that took nothing, undoing what its attempts may have
// left (a FIFO token may wait in its queue: the undo takes it out, so the
// next in line is not kept waiting for its timeout), and returns its
// error: err, or why the wait ended.
func (r *waitRun) giveUp(err error) error {
	if r.s.undoOnExit(r.unknown, r.tried) {
		r.hd.undo(r.wctx, r.k, r.token)
	}
	if err != nil {
		return r.hd.Err("acquire", err)
	}
	return r.hd.Err("acquire", waitEnded(r.ctx, r.wctx, r.hd.pol.Wait, r.lastErr)...)
}

// undoOnPanic runs when an Observer or a logger told of a failed attempt
// panicked on the caller's goroutine: what the wait's end would undo is
// undone in the background before the panic goes on. (An attempt whose
// own call panicked is undone by Handle.attempt.)
func (r *waitRun) undoOnPanic() {
	if r.s.undoOnExit(r.unknown, r.tried) {
		r.hd.undoLater(r.k, r.token)
	}
}
