package lockutil

import (
	"context"
	"errors"
	"time"
)

// Held is what RunHeld needs of a hold that is already acquired.
type Held struct {
	// OnLost registers a function called with the loss, at once if the
	// hold is already lost.
	OnLost func(func(error))
	// LostErr returns the loss, or nil while the hold is not lost.
	LostErr func() error
	// Release gives the hold up.
	Release func(context.Context) error
	// ReleaseTimeout bounds the release, made on a fresh context.
	ReleaseTimeout time.Duration
	// NotHeld is the sentinel Release returns for a hold that is gone; it
	// is dropped from the result when the loss already says so.
	NotHeld error
}

// RunHeld is the body of WithLock once the lock is held: run fn with a
// context cancelled (cause: the loss) when the hold is lost, then release
// on a fresh bounded context — also when fn panics or calls Goexit, the
// panic continuing. It returns fn's error joined with the loss, if the hold
// was lost while fn ran, and with any release error.
func RunHeld(ctx context.Context, h Held, fn func(context.Context) error) error {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	h.OnLost(cancel)

	released := false
	release := func() error {
		released = true
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), h.ReleaseTimeout)
		defer rcancel()
		return h.Release(rctx)
	}
	defer func() {
		if !released { // fn panicked or called runtime.Goexit
			_ = release()
		}
	}()

	ferr := fn(fctx)
	rerr := release()
	if lost := h.LostErr(); lost != nil {
		if errors.Is(rerr, h.NotHeld) {
			rerr = nil // implied by the loss
		}
		return JoinErrs(ferr, lost, rerr)
	}
	return JoinErrs(ferr, rerr)
}
