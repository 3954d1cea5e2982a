package lock

import (
	"context"

	"github.com/agentlock/lock/internal/lease"
)

// WithLock acquires the lock named key (waiting, as [Lock.Acquire]), runs fn,
// and releases the lock, also when fn panics (the panic then continues).
// fn's context is cancelled, with a [*LostError] as its cause (matching
// [ErrLockLost]), as soon as the hold is lost; fn should stop then. The
// release runs even when ctx is already done; WithLock waits for it until
// ctx's deadline, then leaves it to the background.
//
// WithLock returns the Acquire error if the lock was never held; otherwise
// fn's error, joined, whenever the hold was lost while fn ran (whatever fn
// returned), with an error matching ErrLockLost; without a loss, a release
// that failed by the deadline adds its error. opts override the Client's
// defaults for this lock. See docs/guide.md#the-verbs-in-detail.
func (c *Client) WithLock(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	l := c.NewLock(key, opts...)
	if l.degradable() {
		return l.withLockFallback(ctx, fn)
	}
	return lease.WithLock(ctx, "lock", &l.hd, l.kind(), fn)
}
