package lock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
)

// watchBackend runs every operation without scripting (ReleaseWatch), for
// servers where EVAL is denied: acquire is one MULTI around SET NX PX and the
// fence INCR; release, extend and renewal check the token under WATCH and
// change the key in MULTI/EXEC, retried when the key changes in between.
type watchBackend struct {
	rdb     redis.UniversalClient
	fencing bool
	pub     *shardedPub // nil or classic: PUBLISH
}

// watchRetries bounds the optimistic retries of one WATCH transaction. A
// conflict means the key changed under us, which for a lock key is rare.
const watchRetries = 16

// acquire sends SET NX PX, the fence INCR and the counter's PEXPIRE in one
// MULTI, with a GET and PTTL of the key to tell a hold of ours (an earlier
// attempt whose reply was lost) from someone else's. The INCR runs even when
// the SET fails, so fences leave gaps, but a successful SET and its INCR are
// one atomic step. A fence below luascripts.Clocked comes from a counter that
// was missing: see raiseFence.
func (b *watchBackend) acquire(ctx context.Context, k *keys, token string, ttl time.Duration) (acquireResult, error) {
	var (
		set   *redis.BoolCmd
		incr  *redis.IntCmd
		get   *redis.StringCmd
		pttlc *redis.DurationCmd
	)
	_, err := b.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		set = p.SetNX(ctx, k.Lock(), token, ttl)
		if b.fencing {
			incr = p.Incr(ctx, k.Fence())
			// Every write of the counter gives it a TTL, so that a failed
			// attempt on a missing counter leaves no key that lives forever.
			p.PExpire(ctx, k.Fence(), luascripts.FenceTTL)
		}
		get = p.Get(ctx, k.Lock())
		pttlc = p.PTTL(ctx, k.Lock())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return acquireResult{}, err
	}
	ours := set.Val()
	if !ours && get.Err() == nil && get.Val() == token {
		// Ours already: an earlier attempt whose reply was lost. Lengthen
		// the TTL to ttl, never shorten it (see lengthen). The fence from
		// this MULTI is newer than any earlier holder's and older than any
		// later one's, so it serves this hold.
		st, err := b.lengthen(ctx, k, token, ttl)
		if err != nil {
			return acquireResult{}, err
		}
		ours = st == extendOK
	}
	if !ours && isWrongType(get.Err()) {
		// Not a string: someone's re-entrant hold, or another kind.
		if err := otherKind(ctx, b.rdb, k); err != nil {
			return acquireResult{}, err
		}
	}
	if !ours {
		return acquireResult{pttl: max(pttlc.Val(), 0)}, nil
	}
	var fence int64
	if incr != nil {
		fence = incr.Val()
		if fence < luascripts.Clocked {
			if fence, ours, err = b.raiseFence(ctx, k, token); err != nil || !ours {
				return acquireResult{}, err
			}
		}
		if err := b.keepFence(ctx, k, ttl); err != nil {
			return acquireResult{}, err
		}
	}
	return acquireResult{ok: true, fence: fence}, nil
}

// keepFence makes the fence counter, which the acquire of a hold with ttl
// just left with luascripts.FenceTTL at most, live as long as the hold
// (keep_fence in fence.lua): one more call, for a TTL longer than
// FenceTTL only. The hold is ours, so nobody else writes the counter
// meanwhile.
func (b *watchBackend) keepFence(ctx context.Context, k *keys, ttl time.Duration) error {
	if ttl <= luascripts.FenceTTL {
		return nil
	}
	return b.rdb.PExpire(ctx, k.Fence(), ttl).Err()
}

// raiseFence restarts a fencing counter that our acquire's INCR found
// missing (or written without a TTL by an older version): under WATCH of the
// lock and the counter, it checks that the lock still holds our token, reads
// the counter and the server's clock (TIME), and sets the counter to the
// larger of its value plus one and the clock in microseconds plus
// luascripts.FenceStartAhead (where fence.lua restarts a counter), for
// luascripts.FenceTTL. That value is our hold's fence. As in fence.lua, it
// lies above every fence the expired counter handed out while the server's
// clock does not go back; unlike the script, it takes a second round trip
// (once per FenceTTL on a busy key, or per acquisition of a key used once),
// and other attempts' INCRs may come between ours and the raise: those
// attempts failed (we hold the lock), so their values serve no one. It
// reports false when the lock is no longer ours.
func (b *watchBackend) raiseFence(ctx context.Context, k *keys, token string) (int64, bool, error) {
	var fence int64
	txf := func(tx *redis.Tx) error {
		var (
			get, cur *redis.StringCmd
			now      *redis.TimeCmd
		)
		_, err := tx.Pipelined(ctx, func(p redis.Pipeliner) error {
			get = p.Get(ctx, k.Lock())
			cur = p.Get(ctx, k.Fence())
			now = p.Time(ctx)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
			return err
		}
		if get.Err() != nil || get.Val() != token {
			return errNotOurs
		}
		if err := now.Err(); err != nil {
			return err
		}
		c, _ := cur.Int64() // missing or not a number: 0
		fence = max(c+1, now.Val().Add(luascripts.FenceStartAhead).UnixMicro())
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k.Fence(), fence, luascripts.FenceTTL)
			return nil
		})
		return err
	}
	for range watchRetries {
		err := b.rdb.Watch(ctx, txf, k.Lock(), k.Fence())
		switch {
		case errors.Is(err, redis.TxFailedErr):
			continue
		case errors.Is(err, errNotOurs):
			return 0, false, nil
		case err != nil:
			return 0, false, err
		}
		return fence, true, nil
	}
	return 0, false, redis.TxFailedErr
}

// checkAndExec runs fn in MULTI if the lock still holds token, under WATCH.
// It reports extendGone or extendStolen when the key is gone or someone
// else's.
func (b *watchBackend) checkAndExec(ctx context.Context, k *keys, token string, fn func(redis.Pipeliner)) (extendStatus, error) {
	return b.ifOurs(ctx, k, token, func(tx *redis.Tx) error {
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			fn(p)
			return nil
		})
		return err
	})
}

// lengthen makes a hold of ours live at least ttl more, and leaves a longer
// TTL as it is: the acquire that finds the key ours may be one that reaches
// Redis late, after the holder extended the hold past ttl, and must not make
// the key expire before the holder's safety deadline. It reports the hold's
// status as extend does.
func (b *watchBackend) lengthen(ctx context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error) {
	return b.ifOurs(ctx, k, token, func(tx *redis.Tx) error {
		left, err := tx.PTTL(ctx, k.Lock()).Result()
		if err != nil || left >= ttl {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.PExpire(ctx, k.Lock(), ttl)
			return nil
		})
		return err
	})
}

// ifOurs runs then under WATCH of the lock if the lock holds token, and
// again from the start when the key changes before then's EXEC. It reports
// extendGone or extendStolen when the key is gone or someone else's.
func (b *watchBackend) ifOurs(ctx context.Context, k *keys, token string, then func(*redis.Tx) error) (extendStatus, error) {
	status := extendOK
	txf := func(tx *redis.Tx) error {
		v, err := tx.Get(ctx, k.Lock()).Result()
		switch {
		case errors.Is(err, redis.Nil):
			status = extendGone
			return errNotOurs
		case isWrongType(err):
			status = extendStolen
			return errNotOurs
		case err != nil:
			return err
		case v != token:
			status = extendStolen
			return errNotOurs
		}
		return then(tx)
	}
	for range watchRetries {
		err := b.rdb.Watch(ctx, txf, k.Lock())
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if errors.Is(err, errNotOurs) {
			return status, nil
		}
		if err != nil {
			return 0, err
		}
		return extendOK, nil
	}
	return 0, redis.TxFailedErr
}

// release deletes the key in a transaction that go-redis must not resend
// (see luascripts.OnceCmd): run again, it would find the key gone and report our own
// release as a loss. go-redis does not resend a MULTI/EXEC whose reply was
// cut today; the OnceCmd makes that a rule for every client. A transaction
// whose reply is lost returns the connection's error: the outcome is
// unknown.
func (b *watchBackend) release(ctx context.Context, k *keys, token string) (extendStatus, error) {
	return b.checkAndExec(ctx, k, token, func(p redis.Pipeliner) {
		del := new(luascripts.OnceCmd)
		del.Cmder = redis.NewIntCmd(ctx, append(del.Argv[:0], "del", k.Lock())...)
		_ = p.Process(ctx, del)
		if b.pub.sharded(ctx) {
			p.SPublish(ctx, k.Notify(), "released")
		} else {
			p.Publish(ctx, k.Notify(), "released")
		}
	})
}

// extend sets the hold's TTL to ttl. With fencing, the fence counter is
// kept alive at least as long, as extend.lua does (keep_fence in
// fence.lua): its value is the hold's fence, which a forced release's
// audit entry reads there.
func (b *watchBackend) extend(ctx context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error) {
	if !b.fencing {
		return b.checkAndExec(ctx, k, token, func(p redis.Pipeliner) {
			p.PExpire(ctx, k.Lock(), ttl)
		})
	}
	return b.ifOurs(ctx, k, token, func(tx *redis.Tx) error {
		left, err := tx.PTTL(ctx, k.Fence()).Result()
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.PExpire(ctx, k.Lock(), ttl)
			if left != -2 && left < ttl { // -2 (missing): nothing to keep
				p.PExpire(ctx, k.Fence(), ttl)
			}
			return nil
		})
		return err
	})
}

func (b *watchBackend) pttl(ctx context.Context, k *keys, token string) (time.Duration, error) {
	var (
		get   *redis.StringCmd
		pttlc *redis.DurationCmd
	)
	_, err := b.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, k.Lock())
		pttlc = p.PTTL(ctx, k.Lock())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return 0, err
	}
	switch {
	case errors.Is(get.Err(), redis.Nil):
		return 0, errGone
	case get.Err() != nil || get.Val() != token:
		return 0, errNotOurs
	}
	return pttlc.Val(), nil
}

// renew extends each hold in its own WATCH transaction: WATCH pins one
// connection, so these cannot share a pipeline. Script-free mode is for
// servers that deny scripting, not for holding thousands of locks.
func (b *watchBackend) renew(ctx context.Context, items []renewItem, st []extendStatus, errs []error) {
	for i, it := range items {
		st[i], errs[i] = b.extend(ctx, it.k, it.token, it.ttl)
	}
}
