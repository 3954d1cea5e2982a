package lock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// shardedPub decides, once per Client, whether wake-ups use sharded
// pub/sub: on a *redis.ClusterClient whose masters all run Redis 7.0 or
// later, scripts publish with SPUBLISH and waiters listen with SSUBSCRIBE
// on the master of the channel's slot, so a release message is handled by
// one shard instead of every node of the cluster. Anything else (one
// node, Sentinel, Ring, an older server) keeps classic PUBLISH/SUBSCRIBE.
//
// The check runs at the first call that needs it: INFO server on every
// master, then one SPUBLISH on a probe channel under the Client's prefix
// (so that a user whose ACL allows no SPUBLISH keeps classic pub/sub,
// instead of releases whose script fails). A server's refusal (an old
// version, NOPERM) settles it: classic. While the check cannot finish (a
// master unreachable) that call uses classic pub/sub, and so do the calls
// of the next detectRetry and any call made while a check is under way
// (none waits for it); a later call checks again. So at most one call per
// detectRetry waits for a check, for at most detectTimeout (or its ctx). A
// message sent one way while the waiter listens the other way is missed,
// and the waiter wakes by its backoff instead, which costs time, never
// safety. A subscription waits for the check (it runs on a goroutine of
// its own) and does not subscribe when the check fails (it would stay
// subscribed the wrong way): the Notifier tries again, with a check each
// time, while the key has waiters, and they rely on their backoff
// meanwhile.
type shardedPub struct {
	cc     *redis.ClusterClient // nil: never sharded
	prefix string               // the Client's key prefix, for the probe
	state  atomic.Int32         // pubUnknown, pubClassic, pubSharded
	mu     sync.Mutex           // one check at a time; the others go classic meanwhile
	retry  atomic.Int64         // after a failed check: no new one before this (unix ns)
}

// detectRetry is how long after a check that could not finish the next
// one may run: calls meanwhile use classic pub/sub without waiting on it.
const detectRetry = 5 * time.Second

const (
	pubUnknown = iota
	pubClassic
	pubSharded
)

// detectTimeout bounds the check when the caller's ctx has no nearer end.
const detectTimeout = 2 * time.Second

// sharded reports whether wake-ups use sharded pub/sub; see shardedPub.
func (p *shardedPub) sharded(ctx context.Context) bool { return p.mode(ctx, false) == pubSharded }

// mode returns pubClassic or pubSharded, checking first if need be, or
// pubUnknown while no check has finished (see shardedPub). With wait (a
// subscription, on a goroutine of its own) it waits for a check under way
// and checks even within detectRetry of a failed one.
func (p *shardedPub) mode(ctx context.Context, wait bool) int32 {
	if p == nil || p.cc == nil {
		return pubClassic
	}
	if s := p.state.Load(); s != pubUnknown {
		return s
	}
	switch {
	case wait:
		p.mu.Lock()
	case time.Now().UnixNano() < p.retry.Load() || !p.mu.TryLock():
		return pubUnknown // a check failed lately, or one is under way
	}
	defer p.mu.Unlock()
	if s := p.state.Load(); s != pubUnknown {
		return s
	}
	ctx, cancel := context.WithTimeout(ctx, detectTimeout)
	defer cancel()
	var old atomic.Bool
	err := p.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		if !atLeast7(info) {
			old.Store(true)
		}
		return nil
	})
	if err == nil && !old.Load() {
		k := luascripts.NewKeys(p.prefix, "agentlock:probe")
		probe := k.Notify()
		err = p.cc.SPublish(ctx, probe, "probe").Err()
	}
	var refused redis.Error
	switch {
	case errors.As(err, &refused) || old.Load():
		p.state.Store(pubClassic)
	case err != nil:
		// Unknown: classic until a check after detectRetry succeeds.
		p.retry.Store(time.Now().Add(detectRetry).UnixNano())
	default:
		p.state.Store(pubSharded)
	}
	return p.state.Load()
}

// atLeast7 reports whether INFO server's text names Redis 7.0 or later.
// An unreadable version counts as older.
func atLeast7(info string) bool {
	for line := range strings.Lines(info) {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !ok {
			continue
		}
		major, _, _ := strings.Cut(v, ".")
		n, err := strconv.Atoi(major)
		return err == nil && n >= 7
	}
	return false
}

// script returns s, or its sharded variant when wake-ups are sharded.
func (p *shardedPub) script(ctx context.Context, s *redis.Script, src string) (*redis.Script, string) {
	if p.sharded(ctx) {
		return luascripts.Sharded(s), luascripts.ShardedText(src)
	}
	return s, src
}

// shardSources returns the Source of channel's slot: one subscription per
// slot, since go-redis routes a sharded subscription (and its
// resubscription after a reconnect) by its first channel's slot and one
// SSUBSCRIBE must not mix slots.
func (p *shardedPub) shardSources(channel string) []lease.Source {
	return []lease.Source{lease.SlotSource{Client: p.cc, Slot: keySlot(channel)}}
}
