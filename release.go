package lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Release gives the lock up: it takes the hold out of renewal, then, if the
// key still holds our token, either hands the hold straight to the
// longest-waiting Acquire of the same Client on this key (one round trip; the
// waiter returns without one of its own), or deletes the key and publishes
// on its notify channel so that waiters everywhere try at once. After 16
// handoffs in a row on a key, one release frees it, so waiters in other
// processes get their turn. It returns nil when our hold was released; an
// error wrapping [ErrNotHeld] when Redis no longer has it (expired, deleted,
// taken over: the hold is then reported lost, if it was not already) or when
// the handle was never acquired; a wrapped Redis error when the call failed
// or its reply was lost.
//
// After such an error the outcome is unknown: the release may or may not
// have taken effect. The library sends a release once (go-redis does not
// resend it after a connection error), because a resent release would find
// the hold gone and report our own release as a loss, or drop a re-entrant
// level twice. The hold is no longer renewed and, if still there, expires
// by its TTL. Release may be called again: it asks Redis, and returns nil
// if that call released what was left, or [ErrNotHeld] if the hold is
// already gone (by the first call or by expiry, which cannot be told
// apart); either way no loss is reported, [Lock.Lost] stays open.
//
// A second Release after a successful one likewise asks Redis, returns
// ErrNotHeld and touches nothing of anyone else's, for re-entrant holds too.
// Release works after [Client.Close].
func (l *Lock) Release(ctx context.Context) error {
	if err := l.usable(); err != nil {
		return err
	}
	h := l.hold()
	if h == nil {
		return fmt.Errorf("lock: release %q: %w", l.k.User, ErrNotHeld)
	}
	h.relMu.Lock()
	defer h.relMu.Unlock()
	start := time.Now()
	l.c.renewal.remove(h)
	// A hold that already ended (released, lost, or a Release whose outcome
	// was unknown) is still asked about: its token names this hold alone,
	// re-entrant or not, so whatever is left of it goes and nobody else's
	// is touched. If it is gone, no loss is reported (lose ignores an ended
	// hold): our own earlier release may have removed it.
	ended := h.beginRelease()
	var (
		found bool
		st    extendStatus
		err   error
	)
	if !ended {
		// Only a live hold is handed over: once released (or lost) here,
		// the key may be a waiter's by now, and a handoff would claim a
		// waiter for nothing.
		found, st, err = l.handoff(ctx, h)
	}
	if !found {
		st, err = l.be.release(ctx, &l.k, h.token)
	}
	switch {
	case err != nil:
		err = fmt.Errorf("lock: release %q: %w", l.k.User, err)
	case st != extendOK:
		h.lose(l.c.renewal.reason(h, st), nil, true)
		err = fmt.Errorf("lock: release %q: %w", l.k.User, ErrNotHeld)
	}
	h.finish()
	l.observe(Event{Kind: EventRelease, Token: h.token, Fence: h.fence, Duration: time.Since(start), Err: err})
	return err
}

// Extend sets the hold's TTL to ttl, counted from now, if Redis still has
// our hold; later renewals keep the new TTL. A shorter TTL brings the hold's
// safety deadline forward before the call is sent, and keeps it there if
// the call fails. It returns an error wrapping [ErrNotHeld] when the hold
// is gone or someone else's (reporting it lost) or was reported lost before
// the reply came, [ErrInvalid] for ttl < 1ms, [ErrClosed] after Close, or
// the Redis error.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.c.closed.Load() {
		return fmt.Errorf("lock: extend %q: %w", l.k.User, ErrClosed)
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("lock: extend %q: %w", l.k.User, invalidf("ttl %v: must be at least 1ms", ttl))
	}
	h := l.hold()
	if h == nil {
		return fmt.Errorf("lock: extend %q: %w", l.k.User, ErrNotHeld)
	}
	if lost := h.lostErr(); lost != nil {
		// Declared lost: extending now would revive a hold nobody renews.
		return fmt.Errorf("lock: extend %q: %w: %w", l.k.User, ErrNotHeld, lost)
	}
	if l.cfg.ownerSet && !h.active() {
		return fmt.Errorf("lock: extend %q: %w", l.k.User, ErrNotHeld)
	}
	start := time.Now()
	l.c.renewal.extending(h, ttl, start)
	st, err := l.be.extend(ctx, &l.k, h.token, ttl)
	switch {
	case err != nil:
		l.c.renewal.extended(h, ttl, start, false)
		err = fmt.Errorf("lock: extend %q: %w", l.k.User, err)
	case st != extendOK:
		l.c.renewal.remove(h)
		h.markLost(l.c.renewal.reason(h, st), nil)
		err = fmt.Errorf("lock: extend %q: %w", l.k.User, ErrNotHeld)
	default:
		l.c.renewal.extended(h, ttl, start, true)
		if lost := h.lostErr(); lost != nil {
			// Answered after the hold was given up: its deadline, lowered
			// when this call went out, passed first, and nothing renews
			// the hold now.
			err = fmt.Errorf("lock: extend %q: %w: %w", l.k.User, ErrNotHeld, lost)
		}
	}
	l.observe(Event{Kind: EventExtend, Token: h.token, Fence: h.fence, Duration: time.Since(start), Err: err})
	return err
}

// TTL returns the time Redis will keep the hold if it is not renewed, asking
// Redis. It returns an error wrapping [ErrNotHeld] when the hold is gone or
// someone else's (reporting it lost), or the Redis error. A hold someone
// made persistent reports -1.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	h := l.hold()
	if h == nil || (l.cfg.ownerSet && !h.active()) {
		return 0, fmt.Errorf("lock: ttl %q: %w", l.k.User, ErrNotHeld)
	}
	d, err := l.be.pttl(ctx, &l.k, h.token)
	// A flag, not st != 0: extendGone is the zero extendStatus.
	notOurs, st := false, extendOK
	switch {
	case errors.Is(err, errGone):
		notOurs, st = true, extendGone
	case errors.Is(err, errNotOurs):
		notOurs, st = true, extendStolen
	}
	switch {
	case notOurs:
		l.c.renewal.remove(h)
		h.markLost(l.c.renewal.reason(h, st), nil)
		return 0, fmt.Errorf("lock: ttl %q: %w", l.k.User, ErrNotHeld)
	case err != nil:
		return 0, fmt.Errorf("lock: ttl %q: %w", l.k.User, err)
	}
	return d, nil
}
