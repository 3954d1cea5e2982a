package lock

import (
	"context"
	"errors"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// Release gives the lock up: it takes the hold out of renewal, then, if the
// key still holds our token, hands the hold to a waiting Acquire of the
// same Client or deletes the key and wakes the waiters. It returns nil when
// our hold was released; an error wrapping [ErrNotHeld] when Redis no longer
// has it (the hold is then reported lost, if it was not already), when the
// handle was never acquired, or on a second Release; a wrapped Redis error
// when the call failed or its reply was lost.
//
// After such an error the outcome is unknown: Release is sent once, never
// resent. The hold is no longer renewed and, if still there, expires by its
// TTL; Release may be called again and asks Redis; [Lock.Lost] stays open.
// Release returns by ctx's deadline, and works after [Client.Close]. On a
// degraded hold ([Lock.Degraded]) it frees the in-process lock without
// talking to Redis. See docs/guide.md#the-verbs-in-detail.
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
	if o.Status != lease.Gone {
		return o // the common case, asked without building markForced's batch
	}
	out := []lease.Outcome{o}
	markForced(ctx, k.cfg.c.rdb, []*lease.Hold{h}, out)
	return out[0]
}

// Extend sets the hold's TTL to ttl, counted from now, if Redis still has
// our hold; later renewals keep the new TTL. A shorter ttl brings the hold's
// safety deadline forward before the call is sent, and after a failed call
// no safety deadline of the hold counts on a longer TTL.
//
// It returns an error wrapping [ErrNotHeld] when Redis no longer has the
// hold or someone else does (reporting it lost), and, without asking Redis,
// once a Release of the hold has begun or the hold was reported lost;
// [ErrInvalid] for ttl < [MinTTL]; [ErrClosed] after Close; or the Redis
// error. It returns by ctx's deadline, as Release does. Extend of a degraded
// hold ([Lock.Degraded]) does nothing. See docs/guide.md#the-verbs-in-detail
// and docs/safety.md#overlapping-calls-on-one-hold.
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
