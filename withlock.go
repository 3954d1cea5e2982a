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
// even when ctx is already done, and WithLock waits for it until ctx's
// deadline (not its cancellation). A release still out at the deadline goes
// on in the background, [Client.Close] waiting for it; WithLock returns by
// the deadline and does not report it: the release takes the hold out of
// renewal first, so if it fails the key expires by its TTL.
//
// WithLock returns the Acquire error if the lock was never held; otherwise
// fn's error, then, whenever the hold was lost while fn ran (whatever fn
// returned), an error matching ErrLockLost, unless fn's error is that loss
// already (fn returned [context.Cause] of its ctx). Without a loss, a
// release that failed by the deadline adds its error; after a loss the
// release's error is left out, as it adds nothing to the loss. opts override
// the Client's defaults for this lock.
func (c *Client) WithLock(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	l := c.NewLock(key, opts...)
	if l.degradable() {
		return l.withLockFallback(ctx, fn)
	}
	return lease.WithLock(ctx, "lock", &l.hd, l.kind(), fn)
}
