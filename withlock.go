package lock

import (
	"context"

	"github.com/agentlock/lock/internal/lease"
)

// WithLock acquires the lock named key (waiting, as [Lock.Acquire]), runs fn,
// and releases the lock, also when fn panics (the panic then continues).
//
// fn's context is cancelled, with a [*LostError] as its cause (matching
// [ErrLockLost]), as soon as the hold is lost; fn should stop then. The
// release runs on a fresh context bounded by a few seconds, so it happens
// even when ctx is already done.
//
// WithLock returns the Acquire error if the lock was never held; otherwise
// fn's error, joined with an error matching ErrLockLost whenever the hold
// was lost while fn ran (whatever fn returned), and with any release error.
// opts override the Client's defaults for this lock.
func (c *Client) WithLock(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	l := c.NewLock(key, opts...)
	if l.degradable() {
		return l.withLockFallback(ctx, fn)
	}
	if l.fair() {
		return lease.WithLock(ctx, "lock", &l.hd, (*fairKind)(l), fn)
	}
	return lease.WithLock(ctx, "lock", &l.hd, (*kind)(l), fn)
}
