package lease

import (
	"context"
	"errors"
	"log/slog"
)

// withLock is the body of every kind's WithLock (see WithLock): it acquires hd (waiting,
// as Acquire), runs fn with a context cancelled — cause: the loss — when
// the hold is lost, then releases (releaseAfter), also when fn panics or
// calls runtime.Goexit (the panic continuing). hd is a handle fresh from
// the kind's NewLock. It returns the Acquire error if the lock was never
// held; otherwise withLockErr's join of fn's error, the loss and the release's
// error.
func withLock(ctx context.Context, pkg string, hd *Handle, k Kind, fn func(context.Context) error) error {
	if fn == nil {
		return NewOpError(pkg, "with lock", hd.Keys.User, Invalidf("nil func"))
	}
	if err := hd.Acquire(ctx, k); err != nil {
		return err
	}
	h := hd.Hold()
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	h.OnLost(cancel)

	released := false
	defer func() {
		if !released { // fn panicked or called runtime.Goexit
			defer hd.releasePanicked()
			_ = hd.releaseAfter(ctx, k)
		}
	}()

	ferr := fn(fctx)
	released = true
	rerr := hd.releaseAfter(ctx, k)
	return withLockErr(ferr, h.LostErr(), rerr)
}

// withLockErr is what WithLock returns once fn returned ferr and the release
// rerr, lost being the hold's loss (nil if it was not lost while fn ran):
// fn's error, then the loss unless fn's error carries it already (fn
// returned its context's cause), then the release's error unless the hold
// was lost: the loss says all the release could (a release after a loss
// finds the hold gone, or fails for the reason the hold was lost; what is
// left of it expires by its TTL).
func withLockErr(ferr, lost, rerr error) error {
	switch {
	case lost == nil:
		return JoinErrs(ferr, rerr)
	case errors.Is(ferr, lost):
		return ferr
	}
	return JoinErrs(ferr, lost)
}

// releaseAfter releases hd's hold after WithLock's fn, on a fresh context
// bounded by Policy.UndoTimeout, so that the release is sent even when ctx
// is done. It returns by ctx's deadline: a release still out then goes on
// in the background, where Close waits for it (up to BackgroundWait), and
// releaseAfter returns nil, as the release's outcome changes nothing for
// the caller: the release takes the hold out of renewal before it sends
// anything, and if it fails the key expires by its TTL. A ctx without a deadline waits for the release,
// also when ctx is cancelled.
func (hd *Handle) releaseAfter(ctx context.Context, k Kind) error {
	release := func() error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hd.pol.UndoTimeout)
		defer cancel()
		return hd.Release(rctx, k)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return release()
	}
	// Until ctx's deadline, not its cancellation: a caller that gave up
	// early still has its hold released before WithLock returns, when
	// Redis answers in time.
	wctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	err, done := runBounded(hd.pol.Engine, wctx, release, nil)
	if !done {
		return nil
	}
	return err
}

// releasePanicked, deferred by WithLock's release after fn panicked (or
// called runtime.Goexit), recovers a panic of that release (a go-redis
// hook, say), which has ended the hold, and logs it at Error level: fn's
// panic is the one that goes on to the caller.
func (hd *Handle) releasePanicked() {
	if v := recover(); v != nil {
		logPanic(hd.pol.Logger, hd.pol.Pkg+" with lock: release panicked after fn did not return", v, slog.String("key", hd.Keys.User))
	}
}
