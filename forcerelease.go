package lock

import (
	"context"
)

// ForceRelease frees the lock on key whoever holds it, for an operator
// unsticking a holder that will not let go. In one script call it deletes
// the key (and its holder info) and publishes one message per hold it
// removed on the key's notify channel, where waiters wake, and on the
// prefix's force channel (P + "force"), on which every Client whose holds
// are under that prefix listens while it holds any ([WithNotify](false):
// not at all). The holder's process reports the hold lost at once: its [Lock.Lost] closes, [Lock.LostErr]
// says [LossForceReleased], and a [Client.WithLock] context is cancelled
// with that *LostError as cause; a hold whose acquire had not returned yet
// is reported lost as soon as it does. A hold acquired before its Client
// listened on the force channel (its first hold), or by a retry that
// reuses the token of an earlier attempt of unknown outcome, is asked
// about in Redis instead: once its Client listens, or at once. If the
// message does not arrive otherwise (the holder's subscription broke), the
// holder's next renewal, Extend, TTL or Release finds the key gone and
// reports the loss then, as force-released (the script leaves the removed
// tokens in P{K}:forced for their remaining TTL), or as stolen if someone
// took the key meanwhile. The holder's code keeps running until
// it looks at its context or Lost: pass [Lock.Fence] downstream where a
// late write must be refused.
//
// It works for every kind, by the Redis type of the key (see
// [Client.Inspect]): every reader or writer of a [RWLock] and every permit
// of a [Semaphore] is removed and told. A fair lock's ([WithFair]) queue is
// kept, so its head takes the key next. It uses the Client's prefix. It returns nil when it
// removed a hold; an error wrapping [ErrNotHeld] when the key was free;
// [ErrInvalid] for an empty key, a zero Client or a key whose value is no
// lock kind's; or the Redis error (the call is sent once, never resent:
// after an error its outcome is unknown, and [Client.Inspect] tells). To
// remove one hold of several, see [admin.Admin.ForceReleaseToken].
func (c *Client) ForceRelease(ctx context.Context, key string) error {
	return c.forceRelease(ctx, key)
}

func (c *Client) forceRelease(ctx context.Context, key string) error {
	a, err := c.admin(opForceRelease, key)
	if err != nil {
		return err
	}
	return a.ForceRelease(ctx, key)
}

// opForceRelease names ForceRelease in its errors.
const opForceRelease = "force release"
