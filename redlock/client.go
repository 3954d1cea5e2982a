package redlock

import (
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// Client creates quorum locks over N independent Redis nodes (not replicas
// of one another) and owns their background work: one renewal loop for
// every held lock, which renews the holds due together with one pipeline
// per node; one pub/sub subscription per node for waiters, started on first
// need; and the goroutines that carry the per-node calls (reused, and ended
// after a second idle). Create one per process and share it; it is safe for
// concurrent use.
type Client struct {
	nodes []redis.UniversalClient
	srcs  []lease.Source // the nodes, as the engine's Notifier sees them
	cfg   config
	set   *settings // cfg for the engine; nil when err is set
	err   error     // configuration error, returned by every lock

	eng  lease.Engine // renewal, wake-ups, background undos
	work chan task    // hands a call to an idle call goroutine

	// The deletes of releases and undos (see Lock.drop): Close waits for
	// dels, and sends those handed to acquire calls still out at once.
	mu      sync.Mutex
	closing bool                // Close has begun: no more handing over
	handed  map[*round]struct{} // acquire rounds with a delete handed to a call
	dels    sync.WaitGroup      // deletes not returned yet

	fenceRaises atomic.Int64 // acquisitions that needed the extra fence round
}

// New returns a Client over the given nodes: independent Redis servers, each
// a *redis.Client or any other redis.UniversalClient. Use an odd number, at
// least 3 (5 tolerates two failed nodes): with N nodes the lock needs N/2+1
// of them ([WithQuorum]). opts are the defaults of every lock it makes.
//
// An empty list, a nil client, a *redis.Ring (it spreads keys over several
// servers: give each as a node) or the same client twice is reported, wrapping
// [lock.ErrInvalid], by every later call; so is an invalid option. New
// itself never fails and starts no goroutine; see [Client.Close].
//
// Set ContextTimeoutEnabled on the node clients so that a node slower than
// [WithNodeTimeout] has its call cut at the deadline; without it redlock
// still stops waiting at the deadline, but the call runs on until go-redis's
// own read timeout.
func New(clients []redis.UniversalClient, opts ...Option) *Client {
	c := &Client{nodes: clients, cfg: defaultConfig().with(opts), work: make(chan task), handed: map[*round]struct{}{}}
	c.eng.Init(c.sources, c.cfg.logger)
	c.err = checkNodes(clients)
	if c.err == nil {
		c.err = c.cfg.validate(len(clients))
	}
	if c.err == nil {
		c.srcs = make([]lease.Source, len(clients))
		for i, rdb := range clients {
			c.srcs[i] = rdb
		}
		c.set = c.settings(c.cfg)
	}
	return c
}

// checkNodes rejects an empty list, nil clients and duplicates.
func checkNodes(clients []redis.UniversalClient) error {
	if len(clients) == 0 {
		return lease.Invalidf("no redis clients")
	}
	seen := make(map[redis.UniversalClient]int, len(clients))
	for i, rdb := range clients {
		if isNil(rdb) {
			return lease.Invalidf("redis client %d is nil", i)
		}
		if _, ok := rdb.(*redis.Ring); ok {
			// A Ring spreads keys and channels over several servers, and
			// its Subscribe without a channel panics: give each server as
			// a node of its own.
			return lease.Invalidf("redis client %d is a *redis.Ring, not one node", i)
		}
		if j, ok := seen[rdb]; ok {
			return lease.Invalidf("redis clients %d and %d are the same client", j, i)
		}
		seen[rdb] = i
	}
	return nil
}

func isNil(rdb redis.UniversalClient) bool {
	switch v := rdb.(type) {
	case nil:
		return true
	case *redis.Client:
		return v == nil
	case *redis.ClusterClient:
		return v == nil
	case *redis.Ring:
		return v == nil
	}
	return false
}

// Close stops the renewal loop and the node subscriptions and waits for
// them (at most 100ms for a subscription still connecting to a stopped
// node, which ends on its own later). Undos and releases waiting for a
// node's acquire call to return are sent at once, and Close waits for every
// delete still out (each bounded by a node timeout; in all at most 5s).
//
// Close is idempotent and returns nil, also for a zero Client. Locks still
// held are no longer renewed: their Lost channels close when their validity
// runs out. Afterwards Acquire, TryAcquire, Extend and WithLock return
// [lock.ErrClosed]; Release still deletes a hold on every node. Close does
// not close the node clients. See docs/safety.md#the-algorithm-as-implemented.
func (c *Client) Close() error {
	if c.check() != nil {
		return nil // a zero Client has nothing to stop
	}
	c.eng.Close(c.stopDrops)
	return nil
}

// sources returns the clients a notify channel's messages arrive through:
// every node, since a release publishes on each node it deletes on.
func (c *Client) sources(string) []lease.Source { return c.srcs }

// errZeroClient is what the locks of a Client not made by New report.
var errZeroClient = lease.Invalidf("Client not made by New")

// check returns errZeroClient for a zero or nil Client, else nil.
func (c *Client) check() error {
	if c == nil || !c.eng.Ready() {
		return errZeroClient
	}
	return nil
}

// NewLock returns a handle on the lock named key, configured by the
// Client's options and then opts. An empty key or an invalid option is
// reported, wrapping [lock.ErrInvalid], by every verb of the handle; so is
// a Client not made by [New]. NewLock talks to no node and starts nothing.
func (c *Client) NewLock(key string, opts ...Option) *Lock {
	l := &Lock{}
	if s, err := c.lockSettings(key, opts); err != nil {
		l.hd.Fail(key, keyError(key, err))
	} else {
		l.cfg = s
		// A late undo of a failed attempt must not delete what a later
		// attempt wins: every attempt has its own token and undoes itself.
		l.hd.Init(&s.pol, luascripts.NewKeys(s.prefix, key))
	}
	return l
}

// lockSettings returns the settings of a lock on key with opts.
func (c *Client) lockSettings(key string, opts []Option) (*settings, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.err != nil {
		return nil, c.err
	}
	if key == "" {
		return nil, lease.Invalidf("empty key")
	}
	if len(opts) == 0 {
		return c.set, nil
	}
	cfg := c.cfg.with(opts)
	if err := cfg.validate(len(c.nodes)); err != nil {
		return nil, err
	}
	return c.settings(cfg), nil
}

// keyError is the configuration error of the lock on key.
func keyError(key string, err error) error { return lease.NewOpError("redlock", "key", key, err) }
