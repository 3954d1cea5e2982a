package lock

import (
	"context"
)

// ForceRelease frees the lock on key (under the Client's prefix) whoever
// holds it, for an operator unsticking a holder that will not let go. In
// one script call it deletes the key and tells each hold it removed:
// waiters wake, and the holder's process reports the hold lost
// ([Lock.LostErr] says [LossForceReleased]) at once, or at its next renewal
// if the message is missed. The holder's code keeps running until it looks:
// pass [Lock.Fence] downstream where a late write must be refused. Every
// kind works: each reader, writer and permit is removed and told; a fair
// lock's queue is kept.
//
// It returns nil when it removed a hold; an error wrapping [ErrNotHeld] when
// the key was free; [ErrInvalid] for an empty key, a zero Client or a key
// whose value is no lock kind's; or the Redis error (sent once: the outcome
// is then unknown, and [Client.Inspect] tells). To remove one hold of
// several, see [admin.Admin.ForceReleaseToken]. See docs/safety.md#force-release.
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
