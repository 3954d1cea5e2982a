package admin

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// ForceRelease frees the lock on key whoever holds it, for an operator
// unsticking a holder that will not let go. In one script call it deletes
// the key and tells each hold it removed, so waiters wake and the holder's
// process reports the hold lost. It works for every kind: every reader or
// writer of a read-write lock and every permit of a semaphore is removed;
// a fair lock's queue is kept, so its head takes the key next.
//
// It returns nil when it removed a hold; an error wrapping lock.ErrNotHeld
// when the key was free; lock.ErrInvalid for an empty key, a nil Admin or
// a key whose value is no lock kind's; or the Redis error (the call is sent
// once, never resent: after an error its outcome is unknown, and
// [Admin.Inspect] tells). With [WithAudit] it records one entry per hold
// removed. See docs/safety.md#force-release.
func (a *Admin) ForceRelease(ctx context.Context, key string) error {
	return a.forceRelease(ctx, key, "")
}

// ForceReleaseToken removes the one hold of key that has token, as
// [Admin.ForceRelease] does for every hold: one permit of a semaphore, one
// reader of a read-write lock, or the mutex's hold when it is token's (a
// re-entrant mutex's token is its owner id or one hold's id, as
// [Holder].Token shows it; either frees the key, since one owner holds it
// at a time). The other holds stay; the key is deleted when none is left.
// It returns an error wrapping lock.ErrNotHeld when no hold of key has
// token, lock.ErrInvalid for an empty token, and otherwise as ForceRelease.
func (a *Admin) ForceReleaseToken(ctx context.Context, key, token string) error {
	if token == "" {
		if _, err := a.opKeys(opForce, key); err != nil {
			return err
		}
		return lease.NewOpError("lock", opForce, key, lease.Invalidf("empty token"))
	}
	return a.forceRelease(ctx, key, token)
}

// opForce names both force-release verbs in their errors.
const opForce = "force release"

func (a *Admin) forceRelease(ctx context.Context, key, token string) error {
	k, err := a.opKeys(opForce, key)
	if err != nil {
		return err
	}
	script, keys, args := luascripts.ForceRelease, k.ForceKeys(), []any{token, a.forceChannel()}
	inScript := a.stream != "" && a.auditBeside(k.Lock())
	if inScript {
		// The script writes one entry per hold it removes (audit_force.lua),
		// reading the fence counter for a mutex without holder info (which a
		// fencing hold keeps alive as long as itself).
		script, _ = luascripts.Audited(script)
		keys, args = luascripts.AuditArgs(keys, args, a.stream,
			&luascripts.AuditEntry{Max: a.maxLen, Key: key}, []string{k.Fence()})
	}
	var gone []string
	err = a.call(ctx, func() (err error) {
		gone, err = luascripts.RunOnce(ctx, a.rdb, script, keys, args...).StringSlice()
		return err
	})
	switch {
	case err != nil && redis.HasErrorPrefix(err, "KIND"):
		t := strings.TrimSpace(strings.TrimPrefix(err.Error(), "KIND"))
		return lease.NewOpError("lock", opForce, key, lease.Invalidf("key %q holds a Redis %s, no lock kind's", key, t))
	case err != nil:
		return lease.NewOpError("lock", opForce, key, err)
	case len(gone) == 0:
		return lease.NewOpError("lock", opForce, key, lease.ErrNotHeld)
	}
	if !inScript && a.stream != "" {
		for _, tok := range gone {
			a.auditForce(ctx, key, tok)
		}
	}
	return nil
}

// forceChannel names the channel on which every Client hears the
// force-releases of locks under the prefix: the prefix and "force". "" on
// a Ring, whose shards pass no messages between them.
func (a *Admin) forceChannel() string {
	if _, ok := a.rdb.(*redis.Ring); ok {
		return ""
	}
	return a.prefix + "force"
}

// auditBeside reports whether a script on lockKey may write to the audit
// stream: on one node, always; on a Redis Cluster, when both share a hash
// slot; on a Ring, or a client of another type, never.
func (a *Admin) auditBeside(lockKey string) bool {
	switch a.rdb.(type) {
	case *redis.Client:
		return true
	case *redis.ClusterClient:
		return luascripts.KeySlot(a.stream) == luascripts.KeySlot(lockKey)
	}
	return false
}
