package redlock

import (
	"context"

	"github.com/agentlock/lock/internal/lease"
)

// WithLock acquires the lock named key (waiting, as [Lock.Acquire]), runs fn,
// and releases the lock, also when fn panics (the panic then continues).
//
// fn's context is cancelled, with a [*lock.LostError] as its cause (matching
// [lock.ErrLockLost]), as soon as the hold is lost; fn should stop then. The
// release runs on a fresh context, so it happens even when ctx is done;
// WithLock waits for it until ctx's deadline, and a release still out then
// goes on in the background (as [lock.Client.WithLock] says), unreported.
//
// WithLock returns the Acquire error if the lock was never held; otherwise
// fn's error, joined with an error matching ErrLockLost whenever the hold was
// lost while fn ran (whatever fn returned; once, if fn returned the loss
// itself), or else with a release error. opts override the Client's defaults
// for this lock.
func (c *Client) WithLock(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	l := c.NewLock(key, opts...)
	return lease.WithLock(ctx, "redlock", &l.hd, (*kind)(l), fn)
}
