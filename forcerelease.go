package lock

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
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
// after an error its outcome is unknown, and [Client.Inspect] tells).
func (c *Client) ForceRelease(ctx context.Context, key string) error {
	return c.forceRelease(ctx, "force release", key, "")
}

// ForceReleaseToken removes the one hold of key that has token, as
// [Client.ForceRelease] does for every hold: one permit of a semaphore,
// one reader of a read-write lock, or the mutex's hold when it is token's
// (a re-entrant mutex's token is its owner id or one hold's id, as
// [Holder].Token shows it; either frees the key, since one owner holds it
// at a time). The other holds stay; the key is deleted when none is left.
// It returns an error wrapping [ErrNotHeld] when no hold of key has token,
// [ErrInvalid] for an empty token, and otherwise as ForceRelease.
func (c *Client) ForceReleaseToken(ctx context.Context, key, token string) error {
	if token == "" {
		if _, err := c.opKeys("force release", key); err != nil {
			return err
		}
		return lease.NewOpError("lock", "force release", key, invalidf("empty token"))
	}
	return c.forceRelease(ctx, "force release", key, token)
}

func (c *Client) forceRelease(ctx context.Context, op, key, token string) error {
	k, err := c.opKeys(op, key)
	if err != nil {
		return err
	}
	script, keys, args := luascripts.ForceRelease, k.ForceKeys(), []any{token, c.forceChannel(c.cfg.prefix)}
	inScript := c.cfg.audit != "" && c.auditBeside(c.cfg.audit, k.Lock())
	if inScript {
		// The script writes one entry per hold it removes (audit_force.lua),
		// reading the fence counter for a mutex without holder info (which a
		// fencing hold keeps alive as long as itself).
		script, _ = luascripts.Audited(script)
		keys, args = luascripts.AuditArgs(keys, args, c.cfg.audit,
			&luascripts.AuditEntry{Max: c.cfg.auditMax, Key: key}, []string{k.Fence()})
	}
	var n int64
	err = c.callBounded(ctx, func() (err error) {
		n, err = luascripts.RunOnce(ctx, c.rdb, script, keys, args...).Int64()
		return err
	})
	switch {
	case err != nil && redis.HasErrorPrefix(err, "KIND"):
		t := strings.TrimSpace(strings.TrimPrefix(err.Error(), "KIND"))
		return lease.NewOpError("lock", op, key, invalidf("key %q holds a Redis %s, no lock kind's", key, t))
	case err != nil:
		return lease.NewOpError("lock", op, key, err)
	case n == 0:
		return lease.NewOpError("lock", op, key, ErrNotHeld)
	}
	if !inScript {
		c.auditForce(ctx, key, token)
	}
	return nil
}
