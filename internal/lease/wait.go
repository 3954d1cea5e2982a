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
// the background; an Acquire of the FIFO strategy that Close ends waits
// for its undo, and Close waits for that Acquire (up to BackgroundWait).
func (hd *Handle) Acquire(ctx context.Context, k Kind) error {
	if err := hd.begin(); err != nil {
		return err
	}
	defer hd.done()
	p := hd.pol
	s := hd.strategy()
	if !s.enter(p.Engine) {
		return hd.Err("acquire", ErrClosed)
	}
	defer s.leave(p.Engine)
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
	r := waitRun{hd: hd, k: k, s: hd.strategy(), ctx: ctx, wctx: ctx, pass: pass}
	if p := hd.pol; p.Wait > 0 {
		var cancel context.CancelFunc
		r.wctx, cancel = context.WithTimeoutCause(ctx, p.Wait, errWaitTimeout)
		defer cancel()
	}
	if r.token, err = r.s.token(k, "", true); err != nil {
		return 0, nil, "", hd.Err("acquire", err)
	}
	defer func() { r.w.leave() }()
	defer fixOnPanic(func(any) { r.undoOnPanic() })
	now := r.open()
	defer func() { r.stopTimer() }()
	for n := 0; ; n++ {
		var pttl time.Duration
		if h, pttl, err = r.round(n > 0 || now); h != nil {
			return r.attempts, h, r.token, nil
		}
		if err != nil || r.wctx.Err() != nil {
			break
		}
		if r.listen(pttl) {
			// We joined after our failed attempt: a release in between
			// would be missed, so look once more now that we listen.
			continue
		}
		if !r.sleep(n, pttl) {
			break
		}
	}
	return r.attempts, nil, r.token, r.giveUp(err)
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
