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
		return fmt.Errorf("lock: release %q: %w", l.k.user, ErrNotHeld)
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
		err = fmt.Errorf("lock: release %q: %w", l.k.user, err)
	case st != extendOK:
		h.lose(l.c.renewal.reason(h, st), nil, true)
		err = fmt.Errorf("lock: release %q: %w", l.k.user, ErrNotHeld)
	}
	h.finish()
	l.observe(Event{Kind: EventRelease, Token: h.token, Fence: h.fence, Duration: time.Since(start), Err: err})
	return err
}

// Extend sets the hold's TTL to ttl, counted from now, if Redis still has
// our hold; later renewals keep the new TTL. A shorter TTL brings the hold's
// safety deadline forward before the call is sent, and keeps it there if
// the call fails. A failed call may still reach Redis later (one cut at its
// deadline can be on the wire), so after it no safety deadline of the hold
// counts on a TTL longer than ttl, not even one a later Extend or renewal
// confirms: those still set their TTL in Redis, but the hold is renewed at
// a third of ttl and declared lost by what ttl leaves. It returns an error
// wrapping [ErrNotHeld] when the hold is gone or someone else's (reporting
// it lost) or was reported lost before the reply came, [ErrInvalid] for
// ttl < [MinTTL], [ErrClosed] after Close, or the Redis error.
//
// Once a Release of the hold has begun, whatever its outcome, the hold is
// no longer the caller's: it is out of renewal and its [Lock.Lost] never
// closes, so Extend returns ErrNotHeld without asking Redis. It does so
// too when such a Release begins while its own call is out: that call may
// still set ttl on what a failed Release left in Redis, which then lives at
// most ttl and is nobody's hold. [Lock.TTL] follows the same rule.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.c.closed.Load() {
		return fmt.Errorf("lock: extend %q: %w", l.k.user, ErrClosed)
	}
	if ttl < MinTTL {
		return fmt.Errorf("lock: extend %q: %w", l.k.user, ttlError(ttl))
	}
	h := l.hold()
	if h == nil {
		return fmt.Errorf("lock: extend %q: %w", l.k.user, ErrNotHeld)
	}
	if err := l.notHeld("extend", h); err != nil {
		// Extending now would revive a hold nobody renews.
		return err
	}
	start := time.Now()
	l.c.renewal.extending(h, ttl, start)
	st, err := l.be.extend(ctx, &l.k, h.token, ttl)
	switch {
	case err != nil:
		l.c.renewal.extended(h, ttl, start, err)
		err = fmt.Errorf("lock: extend %q: %w", l.k.user, err)
	case st != extendOK:
		l.c.renewal.remove(h)
		h.markLost(l.c.renewal.reason(h, st), nil)
		err = fmt.Errorf("lock: extend %q: %w", l.k.user, ErrNotHeld)
	default:
		l.c.renewal.extended(h, ttl, start, nil)
		// Answered after the hold was given up (its deadline, lowered when
		// this call went out, passed first, or a Release began): nothing
		// renews the hold now, and what this call extended is nobody's.
		err = l.notHeld("extend", h)
	}
	l.observe(Event{Kind: EventExtend, Token: h.token, Fence: h.fence, Duration: time.Since(start), Err: err})
	return err
}

// TTL returns the time Redis will keep the hold if it is not renewed, asking
// Redis. It returns an error wrapping [ErrNotHeld] when the hold is gone or
// someone else's (reporting it lost), or the Redis error. A hold someone
// made persistent reports -1.
//
// Like [Lock.Extend], TTL returns ErrNotHeld without asking Redis once the
// hold was reported lost or a Release of it has begun, whatever that
// Release's outcome, and when such a Release begins while its call is
// out: what a failed Release left in Redis is nobody's hold, and a time
// left on it would read as one.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	h := l.hold()
	if h == nil {
		return 0, fmt.Errorf("lock: ttl %q: %w", l.k.user, ErrNotHeld)
	}
	if err := l.notHeld("ttl", h); err != nil {
		return 0, err
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
		return 0, fmt.Errorf("lock: ttl %q: %w", l.k.user, ErrNotHeld)
	case err != nil:
		return 0, fmt.Errorf("lock: ttl %q: %w", l.k.user, err)
	}
	if err := l.notHeld("ttl", h); err != nil {
		return 0, err // given up while the call was out
	}
	return d, nil
}

// notHeld returns the error Extend and TTL (op) return for a hold that is
// no longer the caller's: reported lost, or a Release of it begun, whatever
// that Release's outcome (see hold.givenUp); nil while the hold is live.
func (l *Lock) notHeld(op string, h *hold) error {
	if lost := h.lostErr(); lost != nil {
		return fmt.Errorf("lock: %s %q: %w: %w", op, l.k.user, ErrNotHeld, lost)
	}
	if h.givenUp() {
		return fmt.Errorf("lock: %s %q: %w: released", op, l.k.user, ErrNotHeld)
	}
	return nil
}
