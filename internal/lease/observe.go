package lease

import (
	"context"
	"errors"
	"time"
)

// errPanicked is the Err of the EventWithLock of a WithLock whose fn
// panicked or called runtime.Goexit.
var errPanicked = errors.New("lock: with lock: fn did not return")

// WithLock is the body of every kind's WithLock: see withLock. With an
// Observer it also reports the whole call as one EventWithLock, after the
// release; a context observer (Policy.ObserveContext) is told first, and
// the context it returns is the one the acquire, fn and the release run
// with, and the EventWithLock carries.
func WithLock(ctx context.Context, pkg string, hd *Handle, k Kind, fn func(context.Context) error) error {
	if hd == nil || hd.pol == nil || hd.pol.Observe == nil {
		return withLock(ctx, pkg, hd, k, fn)
	}
	ctx = hd.pol.enter(hd.Keys.User, ctx)
	start := time.Now()
	returned := false
	defer func() {
		if !returned {
			hd.observeWithLock(ctx, start, errPanicked)
		}
	}()
	err := withLock(ctx, pkg, hd, k, fn)
	returned = true
	hd.observeWithLock(ctx, start, err)
	return err
}

// observeWithLock reports a WithLock call that began at start and ended
// with err. The hold's token and fence are there when it was acquired.
func (hd *Handle) observeWithLock(ctx context.Context, start time.Time, err error) {
	e := Event{Kind: EventWithLock, Ctx: ctx, Err: err}
	end := time.Now()
	e.Duration = end.Sub(start)
	if h := hd.Hold(); h != nil {
		e.Token, e.Fence, e.Held = h.token, h.fence, h.heldUntil(end)
	}
	hd.pol.observe(hd.Keys.User, e)
}

// heldUntil is how long h has been held at t, counted from when its
// acquire was sent.
func (h *Hold) heldUntil(t time.Time) time.Duration { return between(h.since, mono(t)) }

// renewNote is a confirmed renewal, reported to the Observer once the
// Engine's mu is released.
type renewNote struct {
	h        *Hold
	ttl      time.Duration
	validity time.Duration
}

// noteRenewed appends to notes the renewal of h with ttl confirmed at now,
// when h's Policy has an Observer: validity is what the hold had left
// before the renewal landed. Callers hold the Engine's mu, before the
// renewal moves h.sentAt.
func (h *Hold) noteRenewed(notes []renewNote, now int64, ttl time.Duration) []renewNote {
	if h.hd.pol.Observe == nil {
		return notes
	}
	left := between(now, later(h.sentAt, h.capped(h.ttl)))
	return append(notes, renewNote{h: h, ttl: ttl, validity: left})
}

// observeRenewed reports each note's renewal as an EventRenewed.
func observeRenewed(notes []renewNote) {
	for _, n := range notes {
		h := n.h
		h.hd.pol.observe(h.hd.Keys.User, Event{Kind: EventRenewed, Token: h.token, Fence: h.fence, TTL: n.ttl, Validity: n.validity})
	}
}
