package lock

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// MultiLock holds several keys at once: all of them or none. Each member is
// a plain mutex hold of its key (the same as [Client.NewLock] on it), with
// one token and its own fence. It is one hold for the engine: renewed,
// extended, released and lost as a whole; once it is lost, the members
// still ours are released (see [MultiLock.Lost]). Keys are taken in a
// canonical order, one script per slot group, and an attempt that fails
// releases what it took, so a waiting MultiLock holds no member and two
// MultiLocks over overlapping keys never deadlock.
//
// Its methods are safe for concurrent use, but one MultiLock holds its keys
// at most once at a time. [ReleaseWatch], [WithFair], [WithOwner],
// [WithReplicaAck], [WithNotify], [WithHolderInfo] and [WithMetadata] given
// to [Client.NewMultiLock] are [ErrInvalid] (set on the Client, a MultiLock
// ignores them), as are an empty key list, an empty key and a key listed
// twice. See docs/guide.md#multi-locks and docs/safety.md#multi-locks.
type MultiLock struct {
	cfg    *settings
	pol    lease.Policy // the settings' policy, renewed by the MultiLock's own group
	hd     lease.Handle
	keys   []string            // canonical order
	groups [][]luascripts.Keys // the slot groups, in canonical order

	mu      sync.Mutex
	token   string           // the token fences belongs to
	fences  map[string]int64 // the member fences of token's hold
	dropped string           // the lost hold whose members releaseLost released
}

// NewMultiLock returns a handle on the locks of keys, configured by the
// Client's options and then opts. It talks to no server and starts
// nothing; bad input is reported by every verb, wrapping [ErrInvalid].
func (c *Client) NewMultiLock(keys []string, opts ...Option) *MultiLock {
	m := &MultiLock{keys: slices.Clone(keys)}
	label := strings.Join(keys, ",")
	if c.zero() {
		m.hd.Fail(label, keyError(label, errZeroClient))
		return m
	}
	cfg, err := c.kindConfig(kindMulti, opts)
	if err == nil {
		err = c.checkMulti(keys)
	}
	if err != nil {
		m.hd.Fail(label, keyError(label, err))
		return m
	}
	s := c.multi.Load()
	if s == nil || len(opts) > 0 {
		s = c.settings(cfg)
		if len(opts) == 0 {
			c.multi.Store(s)
		}
	}
	m.cfg = s
	m.order(c)
	m.pol = s.pol
	m.pol.Notify = false
	m.pol.Inbox = c.multiInbox(s.prefix, opts)
	m.pol.Gate = m.gate(s)
	if s.aud != nil {
		m.pol.Observe = s.observeSeparate() // multi_*.lua write no entries
	}
	m.pol.Group = func(context.Context, *lease.Hold) lease.Group { return multiGroup{m} }
	k := luascripts.NewKeys(s.prefix, m.keys[0])
	k.User = strings.Join(m.keys, ",")
	// Every attempt backs out of what it took (see Try): the next carries
	// a fresh token, so a release of the last one that lands late cannot
	// free it.
	m.pol.Strategy = lease.Fresh
	m.hd.Init(&m.pol, k)
	return m
}

// multiInbox is the force channel a MultiLock's holds listen on
// (lease.Policy.Inbox). Its waiters never listen, and its config has
// notify cleared for them (optionRules), but its holds hear a
// force-release of a member as a Lock's do: unless WithNotify(false), on
// the Client or the lock, turned the messages off.
func (c *Client) multiInbox(prefix string, opts []Option) string {
	if !c.cfg.with(opts).notify {
		return ""
	}
	return c.forceChannel(prefix)
}

// checkMulti reports bad keys of a MultiLock.
func (c *Client) checkMulti(keys []string) error {
	if len(keys) == 0 {
		return invalidf("multi-lock: no keys")
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		switch {
		case k == "":
			return invalidf("multi-lock: empty key")
		case seen[k]:
			return invalidf("multi-lock: key %q listed twice", k)
		case c.cluster && strings.HasPrefix(k, "}"):
			return invalidf("key %q: on Redis Cluster a key must not start with '}'", k)
		}
		seen[k] = true
	}
	return nil
}

// order sorts m's keys canonically and splits them into slot groups: one
// group on a single Redis, a group per slot on a cluster, a group per key
// on a Ring (whose shards do not follow slots).
func (m *MultiLock) order(c *Client) {
	s := m.cfg
	slot := func(k string) int { return keySlot(s.prefix + "{" + k + "}") }
	slices.SortFunc(m.keys, func(a, b string) int {
		if d := slot(a) - slot(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	_, ring := c.rdb.(*redis.Ring)
	for i, k := range m.keys {
		keys := luascripts.NewKeys(s.prefix, k)
		same := i > 0 && !ring && (!c.cluster || slot(k) == slot(m.keys[i-1]))
		if same {
			m.groups[len(m.groups)-1] = append(m.groups[len(m.groups)-1], keys)
		} else {
			m.groups = append(m.groups, []luascripts.Keys{keys})
		}
	}
}

// Keys returns the member keys in the order they are taken: by cluster
// slot, then by key. nil on a MultiLock whose keys were invalid.
func (m *MultiLock) Keys() []string {
	if m == nil || m.cfg == nil {
		return nil
	}
	return slices.Clone(m.keys)
}

// Key returns the member keys joined by commas, as errors and [Event]s
// name the MultiLock.
func (m *MultiLock) Key() string { return m.handle().Key() }

// Token returns the token every member of the current or last hold
// carries; "" before the first acquisition.
func (m *MultiLock) Token() string { return m.handle().Token() }

// Fence returns the fencing token of member key in the current or last
// hold (see [Lock.Fence]); 0 before the first acquisition, for a key that
// is not a member, or with [WithFencing](false).
func (m *MultiLock) Fence(key string) int64 {
	h := m.handle().Hold()
	if h == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.token != h.Token() {
		return 0
	}
	return m.fences[key]
}

// Lost returns a channel closed when the current hold ends involuntarily:
// when any member is taken, expires, is deleted, or is not confirmed by
// renewal before the hold's safety deadline. The other members are then
// released: before Lost closes when a renewal found a member gone or taken,
// in the background otherwise. nil before the first acquisition. See
// [Lock.Lost].
func (m *MultiLock) Lost() <-chan struct{} { return m.handle().Lost() }

// LostErr returns the [*LostError] of the current hold once [MultiLock.Lost]
// has closed, and nil before.
func (m *MultiLock) LostErr() error { return m.handle().LostErr() }

// Acquire waits until every member is held, ctx is done, or the wait
// timeout passes, as [Lock.Acquire] does; it returns the same errors.
// Between attempts it holds no member: an attempt that does not take
// every member releases what it took before the next one starts (see
// [MultiLock]).
func (m *MultiLock) Acquire(ctx context.Context) error {
	err := m.handle().Acquire(ctx, (*multiKind)(m))
	if err == nil {
		m.releaseOnLoss()
	}
	return err
}

// TryAcquire makes one attempt: (true, nil) when every member is now held,
// (false, nil) when someone else holds one (then none is held), (false,
// err) on failure, as [Lock.TryAcquire]; after a failure, what the attempt
// took has been released, or its release was not confirmed and is sent
// again in the background.
func (m *MultiLock) TryAcquire(ctx context.Context) (bool, error) {
	ok, err := m.handle().TryAcquire(ctx, (*multiKind)(m))
	if ok {
		m.releaseOnLoss()
	}
	return ok, err
}

// Release gives every member up, waking each one's waiters. It returns nil
// when all were ours; an error wrapping [ErrNotHeld] when some member was
// no longer ours (the others are released all the same, and the hold is
// reported lost if it was not already); otherwise the Redis error, as
// [Lock.Release].
func (m *MultiLock) Release(ctx context.Context) error {
	return m.handle().Release(ctx, (*multiKind)(m))
}

// Extend sets every member's TTL to ttl if all are still ours, as
// [Lock.Extend]. The slot groups are extended one call each, not at once:
// if any member is gone or taken, Extend returns [ErrNotHeld], the hold is
// lost, and every member still ours (some possibly just extended) is
// released before Extend returns, as a renewal that finds a member gone
// does before [MultiLock.Lost] closes. If a group's call fails, the others
// keep the new TTL and the error is returned, as [Lock.Extend] does.
func (m *MultiLock) Extend(ctx context.Context, ttl time.Duration) error {
	return m.handle().Extend(ctx, (*multiKind)(m), ttl)
}

// WithMultiLock acquires every lock of keys (waiting, as
// [MultiLock.Acquire]), runs fn, and releases them, also when fn panics,
// with the context and errors of [Client.WithLock]: fn's context is
// cancelled as soon as any member is lost.
func (c *Client) WithMultiLock(ctx context.Context, keys []string, fn func(context.Context) error, opts ...Option) error {
	m := c.NewMultiLock(keys, opts...)
	if fn == nil {
		return lease.WithLock(ctx, "lock", &m.hd, (*multiKind)(m), nil)
	}
	return lease.WithLock(ctx, "lock", &m.hd, (*multiKind)(m), func(ctx context.Context) error {
		m.releaseOnLoss()
		return fn(ctx)
	})
}

// handle returns the engine's handle; nil for a nil MultiLock.
func (m *MultiLock) handle() *lease.Handle {
	if m == nil {
		return nil
	}
	return &m.hd
}
