package lock

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/admin"
	"github.com/agentlock/lock/internal/lease"
)

// Client creates locks over one Redis deployment and owns their background
// work: one renewal loop for every held lock and one pub/sub subscription
// for every waiter, each started on first need. Create one per process and
// share it; it is safe for concurrent use.
type Client struct {
	rdb     redis.UniversalClient
	cfg     config
	set     *settings // cfg for the engine; nil when err is set
	err     error     // configuration error, returned by every lock
	cluster bool

	eng lease.Engine // renewal, wake-ups, background undos

	beMu     sync.Mutex
	backends map[backendKind]backend
	co       *lanes            // shared by every backend that coalesces; made on first use
	sems     map[int]*settings // NewSemaphore's without options, by n (see semSettings)
	shared   sharedSettings    // NewLock's with options, by config (shared.go)

	multi atomic.Pointer[settings] // NewMultiLock's without options; made on first use

	once onceState // Once's flights and policy (once_flight.go)

	local localGate // degraded holds and waiter counts by key (localgate.go)

	pub shardedPub // sharded pub/sub or classic (shardedpub.go)

	ops *admin.Admin // the operators' verbs over rdb, with its prefix, audit and bounds; nil when err is set
}

// NewClient returns a Client over rdb (a *redis.Client, *redis.ClusterClient,
// failover client, *redis.Ring or any other redis.UniversalClient). opts are
// the defaults of every lock it makes. A nil rdb or an invalid option is
// reported, wrapping [ErrInvalid], by every later call; NewClient itself
// never fails. It starts no goroutine; see [Client.Close].
//
// On a Ring, every Redis key of one lock lives on the shard of its hash tag
// and wake-ups subscribe on that shard. Each process's Ring routes by its
// own view of which shards are up: while a shard is marked down, its locks
// are granted afresh by another shard, and processes that disagree about
// it can hold one lock at once, one per shard (see docs/safety.md).
func NewClient(rdb redis.UniversalClient, opts ...Option) *Client {
	c := &Client{rdb: rdb, cfg: defaultConfig().with(opts), backends: map[backendKind]backend{}}
	c.cfg.given = 0 // the Client's options are every lock's defaults
	c.eng.Init(c.sources, c.cfg.logger)
	c.err = c.cfg.validate()
	switch v := rdb.(type) {
	case nil:
		c.err = invalidf("nil redis client")
	case *redis.Client:
		if v == nil {
			c.err = invalidf("nil redis client")
		}
	case *redis.ClusterClient:
		c.cluster = true
		if v == nil {
			c.err = invalidf("nil redis client")
		} else {
			c.pub.cc, c.pub.prefix = v, c.cfg.prefix
		}
	case *redis.Ring:
		if v == nil {
			c.err = invalidf("nil redis client")
		}
	}
	if c.err == nil {
		// NewLock's settings without options: the defaults a mutex takes.
		cfg := c.cfg
		_ = cfg.forMutex() // drops, never refuses: nothing is given
		c.set = c.settings(cfg)
		c.ops = c.newAdmin()
	}
	return c
}

// zero reports whether c is a zero (or nil) Client, not made by NewClient:
// it has no configuration, backends or background work to lend a lock.
func (c *Client) zero() bool { return c == nil || !c.eng.Ready() }

// Close stops the renewal loop and the wake-up subscriptions and waits for
// them to return (a renewal call out to a server that does not answer, until
// go-redis gives it up). It also waits, at most 5s, for background work: the
// calls their callers stopped waiting for, the undos of acquisitions of
// unknown outcome, and fair waiters leaving their queues, so the redis
// client can be closed right after. Close does not close the redis client.
// It is idempotent and always returns nil, also on a zero or nil Client.
//
// Locks still held are no longer renewed: their Lost channels close at
// their safety deadlines, also while Close waits. Afterwards Acquire,
// TryAcquire, Extend and WithLock return [ErrClosed]; Release still deletes
// a hold, so shutdown order strands nothing. See docs/safety.md#close.
func (c *Client) Close() error {
	if c.zero() {
		return nil // nothing was started
	}
	c.eng.Close(nil)
	return nil
}

// sources returns the clients the messages of a notify channel arrive
// through: on a Ring, the shard of the channel's hash tag (a Ring's shards
// pass no messages between them); on a cluster with sharded pub/sub, the
// channel's slot (see shardedPub); otherwise the Client's one client.
func (c *Client) sources(channel string) []lease.Source {
	if !strings.Contains(channel, "{") {
		// The per-prefix force-release inbox (holderinfo.go), the one
		// channel that is no key's: forcerelease.lua publishes on it
		// classically, so it is heard classically.
		return []lease.Source{c.rdb}
	}
	switch c.pub.mode(c.eng.Context(), true) {
	case pubSharded:
		return c.pub.shardSources(channel)
	case pubUnknown:
		return nil // not the wrong way for good: see shardedPub
	}
	if ring, ok := c.rdb.(*redis.Ring); ok {
		shard, err := ring.GetShardClientForKey(channel)
		if err != nil {
			return nil
		}
		return []lease.Source{shard}
	}
	return []lease.Source{c.rdb}
}
