package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Acquire waits until the lock is held, ctx is done, or Policy.Wait
// passes, sleeping between attempts with jittered exponential backoff
// (Backoff), never past the holder's remaining TTL, and waking at once
// when a release's message or a handed-over hold arrives. It returns nil
// when held; an error wrapping ErrNotAcquired when the wait ended (also
// matching context.Cause(ctx) when ctx ended it, and the last failed
// attempt's error, if any); the attempt's error when it is Final; or
// ErrInvalid or ErrClosed. What a failed attempt may have set is undone in
// the background; an Acquire of a queued kind (Policy.Queued) that Close
// ends waits for its undo, and Close waits for that Acquire (up to
// BackgroundWait).
func (hd *Handle) Acquire(ctx context.Context, k Kind) error {
	if err := hd.begin(); err != nil {
		return err
	}
	defer hd.done()
	p := hd.pol
	if p.Queued {
		// Its way out undoes its token, taking it out of the queue: Close
		// waits for that (as for a background task), so a redis client
		// closed right after Close does not leave the entry behind, to be
		// handed the key by the next release and hold it for a TTL.
		if !p.Engine.track() {
			return hd.Err("acquire", ErrClosed)
		}
		defer p.Engine.bg.Done()
	}
	start := time.Now()
	p.observe(hd.Keys.User, Event{Kind: EventAcquireStart, Ctx: ctx})
	var pass GatePass
	if p.Gate != nil {
		var err error
		if pass, err = p.Gate.Enter(hd, true); err != nil {
			p.observe(hd.Keys.User, Event{Kind: EventAcquire, Ctx: ctx, Duration: time.Since(start), Err: err})
			return err
		}
		defer hd.leaveGate(pass, hd.Hold())
	}
	attempts, h, token, err := hd.wait(ctx, k, pass)
	if err != nil {
		p.observe(hd.Keys.User, Event{Kind: EventAcquire, Ctx: ctx, Token: token, Duration: time.Since(start), Attempts: attempts, Err: err})
		return err
	}
	hd.observeHeld(k, h, Event{Kind: EventAcquire, Ctx: ctx, Token: token, Fence: h.fence, Duration: time.Since(start), Attempts: attempts})
	hd.settle(h)
	return nil
}

// wait is Acquire's loop. It returns the attempts made, the hold, and the
// token of the last attempt.
func (hd *Handle) wait(ctx context.Context, k Kind, pass GatePass) (attempts int, h *Hold, token string, err error) {
	p, e := hd.pol, hd.pol.Engine
	wctx := ctx
	if p.Wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, p.Wait, errWaitTimeout)
		defer cancel()
	}
	if !p.FreshTokens {
		if token, err = k.Token(); err != nil {
			return 0, nil, "", hd.Err("acquire", err)
		}
	}
	var (
		unknown bool  // an attempt failed after it may have reached Redis
		tried   bool  // an attempt went out with token (queued: it may wait in the queue)
		lastErr error // the last failed attempt's error
		fails   int   // failed attempts in a row
		timer   *time.Timer
		w       *Waiter
	)
	defer func() { w.leave() }()
	defer fixOnPanic(func(any) {
		// An Observer or a logger told of a failed attempt panicked on the
		// caller's goroutine: what the wait's end would undo is undone in
		// the background before the panic goes on. (An attempt whose own
		// call panicked is undone by attempt.)
		if (unknown || (p.Queued && tried)) && !p.FreshTokens {
			hd.undoLater(k, token)
		}
	})
	channel := hd.Keys.Notify()
	if p.Notify && (p.Eager || p.Queued || e.Notifier.queued(channel)) {
		// Others in this process already wait for this key: queue behind
		// them instead of racing the one a release is about to wake. An
		// eager Acquire joins before its first attempt, which it makes at
		// once all the same: listening by then, it needs no second look
		// after a failed attempt unless the subscription is confirmed only
		// after that attempt went out (the confirmation wakes it). A
		// queued kind (a fair lock) listens before its first attempt,
		// which joins the queue in Redis, so no message for it can come
		// in between.
		w, _ = e.Notifier.join(channel, hd, k, token, false)
	}

	for n := 0; ; n++ {
		if e.Closed() {
			err = ErrClosed
			break
		}
		if g, ok := w.takeGift(); ok && !g.Retry {
			// A release in this process handed us the lock.
			h, ierr := hd.install(token, g.Fence, g.Sent, unknown)
			if ierr == nil {
				return attempts, h, token, nil
			}
			// install refused it: undo it, which spends the token; w gets a
			// fresh one before it is claimable again.
			hd.undo(wctx, k, token)
			unknown, tried, lastErr = false, false, ierr
			if err = hd.respend(k, w, &token); err != nil {
				w.endAttempt()
				break
			}
			w.endAttempt()
		} else if ok && g.Unknown {
			// The handoff may have set our token in Redis: if we give up
			// before an attempt of ours finds out, it must be undone.
			unknown = true
		}
		var pttl time.Duration
		if (n > 0 || w == nil || p.Eager || p.Queued) && w.beginAttempt() {
			if p.FreshTokens {
				if token, err = k.Token(); err != nil {
					w.endAttempt()
					break
				}
			}
			attempts++
			tried = true
			a, held, cut := hd.attempt(wctx, k, token, pass, unknown && !p.FreshTokens)
			if (a.Spent || cut) && !p.FreshTokens {
				// An undo of this token was sent, or will be once the cut
				// call returns: it may land late, after a later attempt took
				// the key, so the attempts that follow carry a fresh token,
				// given to w before it is claimable again. A cut call is
				// undone once it returns (attempt); an earlier attempt of
				// unknown outcome is undone with the old token now.
				if cut && unknown && !p.Queued {
					hd.undoLater(k, token)
				}
				unknown, tried = false, false
				if rerr := hd.respend(k, w, &token); rerr != nil {
					w.endAttempt()
					err = rerr
					break
				}
			}
			if held == nil {
				w.endAttempt()
			}
			switch {
			case held != nil:
				return attempts, held, token, nil
			case a.Done:
				err = ErrDone
			case a.Err == nil:
				pttl, fails = a.PTTL, 0
			case cut:
				// The wait ended during the call: it is settled in the
				// background. No reply is all we know of Redis.
				if lastErr == nil {
					lastErr = a.Err
				}
				fails++
				hd.attemptFailed(ctx, token, attempts, fails, a.Err)
			default:
				unknown = unknown || a.Unknown
				if wctx.Err() != nil && errors.Is(a.Err, wctx.Err()) {
					break // the wait's own end: nothing learnt of Redis
				}
				lastErr = a.Err
				fails++
				hd.attemptFailed(ctx, token, attempts, fails, a.Err)
				if a.Final && wctx.Err() == nil {
					err = a.Err
				}
			}
			if err != nil {
				break
			}
		}
		if wctx.Err() != nil {
			break
		}
		if w == nil && p.Notify {
			var ready bool
			w, ready = e.Notifier.join(channel, hd, k, token, pttl > 0)
			if ready && pttl > 0 {
				// We joined after our failed attempt: a release in between
				// would be missed, so look once more now that we listen.
				continue
			}
		}
		d := Backoff(p.BackoffMin, p.BackoffMax, n)
		if pttl > 0 && pttl < d {
			d = pttl
		}
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-w.wake():
		case <-timer.C:
		case <-wctx.Done():
		case <-e.ctx.Done():
		}
		if wctx.Err() != nil {
			break
		}
	}
	if (unknown || (p.Queued && tried)) && !p.FreshTokens {
		// A queued kind's token may wait in its queue: the undo takes it
		// out, so the next in line is not kept waiting for its timeout.
		// (After a cut call the token is a fresh one no attempt carried,
		// and the cut call's own undo follows its reply: see attempt.)
		hd.undo(wctx, k, token)
	}
	if err != nil {
		return attempts, nil, token, hd.Err("acquire", err)
	}
	return attempts, nil, token, hd.Err("acquire", waitEnded(ctx, wctx, p.Wait, lastErr)...)
}

// leaveGate ends pass once its acquisition on hd has returned, with the
// hold the acquisition installed, if any: the current hold when it is not
// prev, the one before (begin refuses to start while a hold is live, and
// nothing installs a hold on hd once the acquisition has returned). It
// runs on the acquisition's way out, a panic's included.
func (hd *Handle) leaveGate(pass GatePass, prev *Hold) {
	h := hd.Hold()
	if h == prev {
		h = nil
	}
	pass.Leave(h)
}

// respend replaces *token, which an undo has spent, with a fresh one for
// the next attempts of an Acquire, and gives that to w, which must not be
// claimable meanwhile (a release would hand it the hold under the spent
// token).
func (hd *Handle) respend(k Kind, w *Waiter, token *string) error {
	fresh, err := k.Token()
	if err != nil {
		return err
	}
	*token = fresh
	w.retoken(fresh)
	return nil
}

// waitEnded says why a wait on wctx (made from the caller's ctx) ended: an
// error matching ErrNotAcquired, and the cause; then the last attempt's
// error, if any.
func waitEnded(ctx, wctx context.Context, wait time.Duration, lastErr error) []error {
	var errs []error
	if cause := context.Cause(wctx); errors.Is(cause, errWaitTimeout) && ctx.Err() == nil {
		errs = append(errs, fmt.Errorf("%w after %v", ErrNotAcquired, wait))
	} else {
		// Match both ctx.Err() and, when the canceller gave one, its cause.
		ended := ctx.Err()
		if cause = context.Cause(ctx); cause != nil && cause != ended {
			ended = fmt.Errorf("%w (%w)", ended, cause)
		}
		errs = append(errs, ErrNotAcquired, ended)
	}
	if lastErr != nil {
		errs = append(errs, &lastError{lastErr})
	}
	return errs
}

// lastError is the last failed attempt's error, in the error of a wait
// that ended.
type lastError struct{ err error }

func (e *lastError) Error() string { return "last error: " + Bare(e.err) }
func (e *lastError) Unwrap() error { return e.err }

// warnAfter is the failed attempts in a row after which Acquire logs a
// warning rather than a debug line, and warnEvery how many more pass
// before the next warning.
const (
	warnAfter = 3
	warnEvery = 10
)

// attemptFailed reports the n-th attempt of an Acquire (the fails-th
// failure in a row), which failed with err: to the Observer, and to the
// logger at debug level, or as a warning at the warnAfter-th failure in a
// row and every warnEvery-th after.
func (hd *Handle) attemptFailed(ctx context.Context, token string, n, fails int, err error) {
	p := hd.pol
	p.observe(hd.Keys.User, Event{Kind: EventAttemptFailed, Ctx: ctx, Token: token, Attempts: n, Err: err})
	lg := p.Logger
	if lg == nil {
		return
	}
	level := slog.LevelDebug
	if fails >= warnAfter && (fails-warnAfter)%warnEvery == 0 {
		level = slog.LevelWarn
	}
	lg.Log(ctx, level, p.Pkg+" acquire attempt failed", slog.String("key", hd.Keys.User),
		slog.Int("attempt", n), slog.Int("failures_in_a_row", fails), slog.Any("err", err))
}

// Backoff returns the n-th sleep of a waiting acquire: uniform in
// [lo, min(hi, lo·2^n)], exponential backoff with jitter. It does not
// overflow for any n or bounds.
func Backoff(lo, hi time.Duration, n int) time.Duration {
	ceil := lo
	for i := 0; i < n && ceil < hi; i++ {
		if ceil > hi/2 {
			ceil = hi
			break
		}
		ceil *= 2
	}
	ceil = min(ceil, hi)
	if ceil <= lo {
		return lo
	}
	return lo + rand.N(ceil-lo+1)
}

// ErrDone is matched by the error of an Acquire that stopped because an
// attempt found what its caller waits for without the hold (Attempt.Done).
var ErrDone = errors.New("lock: done without the lock")
