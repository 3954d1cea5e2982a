package redlock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
)

// Client creates quorum locks over N independent Redis nodes (not replicas
// of one another) and owns their background work: one renewal goroutine per
// held lock (started when its first renewal is due, so a lock released
// sooner costs none), one pub/sub subscription per node for waiters, started
// on first need, and the goroutines that carry the per-node calls (reused, and
// ended after a second idle). Create one per process and share it; it is
// safe for concurrent use.
type Client struct {
	nodes []redis.UniversalClient
	cfg   config
	err   error // configuration error, returned by every lock

	mu     sync.Mutex // orders Close against goroutine starts
	closed atomic.Bool
	ctx    context.Context // ends at Close, stopping background work
	cancel context.CancelFunc
	wg     sync.WaitGroup

	notifier notifier
	work     chan func() // hands a call to an idle call goroutine

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
	c := &Client{nodes: clients, cfg: defaultConfig().with(opts), work: make(chan func())}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.notifier.init(c)
	c.err = checkNodes(clients)
	if c.err == nil {
		c.err = c.cfg.validate(len(clients))
	}
	return c
}

// checkNodes rejects an empty list, nil clients and duplicates.
func checkNodes(clients []redis.UniversalClient) error {
	if len(clients) == 0 {
		return invalidf("no redis clients")
	}
	seen := make(map[redis.UniversalClient]int, len(clients))
	for i, rdb := range clients {
		if isNil(rdb) {
			return invalidf("redis client %d is nil", i)
		}
		if _, ok := rdb.(*redis.Ring); ok {
			// A Ring spreads keys and channels over several servers, and
			// its Subscribe without a channel panics: give each server as
			// a node of its own.
			return invalidf("redis client %d is a *redis.Ring, not one node", i)
		}
		if j, ok := seen[rdb]; ok {
			return invalidf("redis clients %d and %d are the same client", j, i)
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

// Close stops every renewal goroutine and node subscription and waits for
// them to return; idle call goroutines end too, and a call still in flight
// ends its goroutine when it returns (by its node timeout, or go-redis's
// read timeout on clients without ContextTimeoutEnabled). Undos and
// releases that were waiting for a node's acquire call to return are sent
// at once, and Close waits for them (a node timeout). Close waits at most
// 100ms for the subscriptions: one still connecting to a stopped node
// holds go-redis's PubSub until the node answers or go-redis's read timeout
// passes, and its goroutine ends then, after Close has returned.
//
// Close is idempotent and returns nil, also for a zero Client. Locks still
// held are no longer renewed: their Lost channels close when their validity
// runs out. Afterwards Acquire, TryAcquire, Extend and WithLock return
// [lock.ErrClosed]; Release still deletes a hold on every node. Close does
// not close the node clients.
func (c *Client) Close() error {
	if c.check() != nil {
		return nil // a zero Client has nothing to stop
	}
	c.mu.Lock()
	if c.closed.Swap(true) {
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	c.cancel()
	c.notifier.close()
	c.wg.Wait()
	return nil
}

// goBackground runs fn on a goroutine that Close waits for; it reports false,
// running nothing, once Close has begun.
func (c *Client) goBackground(fn func()) bool { return c.spawn(&c.wg, fn) }

// spawn runs fn on a goroutine counted in wg; it reports false, running
// nothing, once Close has begun.
func (c *Client) spawn(wg *sync.WaitGroup, fn func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return false
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		fn()
	}()
	return true
}

// errZeroClient is what the locks of a Client not made by New report.
var errZeroClient = fmt.Errorf("redlock: %w: Client not made by New", lock.ErrInvalid)

// check returns errZeroClient for a zero or nil Client, else nil.
func (c *Client) check() error {
	if c == nil || c.cancel == nil {
		return errZeroClient
	}
	return nil
}

// NewLock returns a handle on the lock named key, configured by the
// Client's options and then opts. An empty key or an invalid option is
// reported, wrapping [lock.ErrInvalid], by every verb of the handle; so is
// a Client not made by [New]. NewLock talks to no node and starts nothing.
func (c *Client) NewLock(key string, opts ...Option) *Lock {
	if err := c.check(); err != nil {
		return &Lock{c: c, key: key, err: err}
	}
	l := &Lock{c: c, cfg: c.cfg.with(opts), key: key}
	l.err = c.err
	if l.err == nil {
		l.err = l.cfg.validate(len(c.nodes))
	}
	if l.err == nil && key == "" {
		l.err = invalidf("empty key")
	}
	if l.err != nil {
		l.err = fmt.Errorf("redlock: key %q: %w", key, l.err)
		return l
	}
	l.k = luascripts.NewKeys(l.cfg.prefix, key)
	l.quorum = l.cfg.quorumOf(len(c.nodes))
	l.nodeTimeout = effectiveNodeTimeout(&l.cfg)
	l.ttlArg = strconv.FormatInt(l.cfg.ttl.Milliseconds(), 10)
	return l
}
