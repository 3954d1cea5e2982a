package lock

import (
	"context"
	"errors"
	"time"

	"github.com/agentlock/lock/internal/lease"
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
// Release returns by ctx's deadline, give or take a goroutine's scheduling,
// even when Redis does not answer: the outcome is then unknown, and the
// call goes on in the background. Release works after [Client.Close].
//
// Release of a degraded hold ([Lock.Degraded]) frees the in-process lock
// without talking to Redis; a second one returns ErrNotHeld.
func (l *Lock) Release(ctx context.Context) error {
	if d := l.degraded(); d != nil {
		return l.releaseLocal(ctx, d)
	}
	return l.handle().Release(ctx, l.kind())
}

// Release drops h: it hands the hold straight to a waiter of this Client
// when it can (only a hold that has not ended: once released or lost here,
// the key may be a waiter's by now, and a handoff would claim a waiter for
// nothing), and otherwise deletes it. Either way, a hold found gone that a
// force release removed is reported so (checkForced).
func (k *kind) Release(ctx context.Context, h *lease.Hold, ended bool) lease.Outcome {
	return k.release(ctx, h, ended, (*Lock).handoff)
}

// release drops h as Release says, handing it over by handoff.
func (k *kind) release(ctx context.Context, h *lease.Hold, ended bool,
	handoff func(*Lock, context.Context, *lease.Hold) (lease.Outcome, bool)) lease.Outcome {
	if !ended {
		if o, found := handoff((*Lock)(k), ctx, h); found {
			return k.checkForced(ctx, h, o)
		}
	}
	return k.checkForced(ctx, h, outcome(k.cfg.release(ctx, &k.hd.Keys, h.Token(), h.Fence())))
}

// checkForced returns o, made [lease.Forced] when it says h is gone and a
// force release removed h (markForced).
func (k *kind) checkForced(ctx context.Context, h *lease.Hold, o lease.Outcome) lease.Outcome {
	out := []lease.Outcome{o}
	markForced(ctx, k.cfg.c.rdb, []*lease.Hold{h}, out)
	return out[0]
}

// Extend sets the hold's TTL to ttl, counted from now, if Redis still has
// our hold; later renewals keep the new TTL. A shorter TTL brings the hold's
// safety deadline forward before the call is sent, and keeps it there if
// the call fails. A failed call may still reach Redis later (one cut at its
// deadline can be on the wire), so after it no safety deadline of the hold
// counts on a TTL longer than ttl, not even one a later Extend or renewal
// confirms: those still set their TTL in Redis, but the hold is renewed at
// a third of ttl and declared lost by what ttl leaves. It returns an error
// wrapping [ErrNotHeld] when the hold was released or reported lost
// (without asking Redis: a hold given up is not revived), when Redis no
// longer has it or someone else does (reporting it lost), or when it was
// reported lost before the reply came; [ErrInvalid] for ttl < [MinTTL],
// [ErrClosed] after Close, or the Redis error. It returns by ctx's
// deadline, as Release does: a call still unanswered then counts, for the
// hold's safety deadline, as out until it returns.
//
// Once a Release of the hold has begun, whatever its outcome, the hold is
// no longer the caller's: it is out of renewal and its [Lock.Lost] never
// closes, so Extend returns ErrNotHeld without asking Redis. It does so
// too when such a Release begins while its own call is out: that call may
// still set ttl on what a failed Release left in Redis, which then lives at
// most ttl and is nobody's hold. [Lock.TTL] follows the same rule.
//
// Extend of a degraded hold ([Lock.Degraded]) does nothing and returns nil
// while it is held (ttl must still be valid), ErrNotHeld once released.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if d := l.degraded(); d != nil {
		return l.extendLocal(d, ttl)
	}
	return l.handle().Extend(ctx, l.kind(), ttl)
}

// CheckTTL refuses a TTL Redis cannot hold.
func (k *kind) CheckTTL(ttl time.Duration) error {
	if ttl < MinTTL {
		return ttlError(ttl)
	}
	return nil
}

// Extend sends one extend of h.
func (k *kind) Extend(ctx context.Context, h *lease.Hold, ttl time.Duration) (lease.Outcome, <-chan struct{}) {
	return k.checkForced(ctx, h, outcome(k.cfg.extend(ctx, &k.hd.Keys, h.Token(), h.Fence(), ttl))), nil
}

// TTL returns the time Redis will keep the hold if it is not renewed, asking
// Redis. It returns an error wrapping [ErrNotHeld] when the hold is gone or
// someone else's (reporting it lost), or the Redis error. A hold someone
// made persistent reports -1. It returns by ctx's deadline, as Release
// does.
//
// Like [Lock.Extend], TTL returns ErrNotHeld without asking Redis once the
// hold was reported lost or a Release of it has begun, whatever that
// Release's outcome, and when such a Release begins while its call is
// out: what a failed Release left in Redis is nobody's hold, and a time
// left on it would read as one.
//
// A degraded hold ([Lock.Degraded]) has no key in Redis: TTL returns an
// error wrapping ErrNotHeld that says so, without asking Redis.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if err := l.handle().Usable(); err != nil {
		return 0, err
	}
	if l.deg.Load() != nil {
		return 0, l.hd.Err("ttl", ErrNotHeld, errDegradedTTL)
	}
	h := l.hd.Hold()
	if h == nil {
		return 0, l.hd.Err("ttl", ErrNotHeld)
	}
	if err := l.hd.NotHeld("ttl", h); err != nil {
		return 0, err
	}
	type reply struct {
		d    time.Duration
		err  error
		gone lease.Status // errGone: Gone, or Forced (checkForced)
	}
	r, ok := lease.Call(&l.hd, ctx, func() reply {
		d, err := l.pttl(ctx, h.Token())
		r := reply{d: d, err: err}
		if errors.Is(err, errGone) {
			r.gone = (*kind)(l).checkForced(ctx, h, lease.Outcome{Status: lease.Gone}).Status
		}
		return r
	})
	switch {
	case !ok:
		return 0, l.hd.Err("ttl", context.Cause(ctx))
	case errors.Is(r.err, errGone):
		l.hd.Lose(h, r.gone)
		return 0, l.hd.Err("ttl", ErrNotHeld)
	case errors.Is(r.err, errNotOurs):
		l.hd.Lose(h, lease.Stolen)
		return 0, l.hd.Err("ttl", ErrNotHeld)
	case r.err != nil:
		return 0, l.hd.Err("ttl", r.err)
	}
	if err := l.hd.NotHeld("ttl", h); err != nil {
		return 0, err // given up while the call was out
	}
	return r.d, nil
}

// pttl asks Redis for the time left on the hold of token.
func (l *Lock) pttl(ctx context.Context, token string) (time.Duration, error) {
	if l.rw != nil {
		return l.rwPTTL(ctx, token)
	}
	return l.cfg.be.pttl(ctx, &l.hd.Keys, token)
}
