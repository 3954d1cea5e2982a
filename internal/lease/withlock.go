package lease

import (
	"context"
	"errors"
	"log/slog"
)

// withLock is the body of every kind's WithLock (see WithLock): it acquires hd (waiting,
// as Acquire), runs fn with a context cancelled — cause: the loss — when
// the hold is lost, then releases on a fresh context bounded by
// Policy.UndoTimeout, also when fn panics or calls runtime.Goexit (the
// panic continuing). hd is a handle fresh from the kind's NewLock. It
// returns the Acquire error if
// the lock was never held; otherwise fn's error joined with the loss, if
// the hold was lost while fn ran, and with any release error.
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
	release := func() error {
		released = true
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), hd.pol.UndoTimeout)
		defer rcancel()
		return hd.Release(rctx, k)
	}
	defer func() {
		if !released { // fn panicked or called runtime.Goexit
			defer hd.releasePanicked()
			_ = release()
		}
	}()

	ferr := fn(fctx)
	rerr := release()
	if lost := h.LostErr(); lost != nil {
		if errors.Is(rerr, ErrNotHeld) {
			rerr = nil // implied by the loss
		}
		return JoinErrs(ferr, lost, rerr)
	}
	return JoinErrs(ferr, rerr)
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
