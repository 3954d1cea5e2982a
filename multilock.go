package lock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// MultiLock holds several keys at once: all of them or none. Each member is
// a plain mutex hold of its key (the same as [Client.NewLock] on it), so a
// Lock on any member key excludes the MultiLock and the other way round;
// every member carries one token and its own fence. It is one hold for the
// engine: renewed, extended, released and lost as a whole; once it is
// lost, the members still ours are released (see [MultiLock.Lost]).
//
// Keys are taken in a canonical order — by Redis Cluster slot, then by key
// — and the keys of one slot group (every key on a single Redis, or those
// sharing a slot on a cluster) by one script that takes all of them or
// none: one round trip per slot group, not per key. When a later group is
// held by someone else or its call fails, the attempt releases the groups
// it took, and undoes the one whose call failed, before it reports: a
// waiting MultiLock holds no member between attempts, and two MultiLocks
// over overlapping keys never deadlock. A release that fails is sent
// again in the background; a member whose release never lands expires by
// its TTL, and no later attempt (each has a token of its own) keeps it.
// A waiting Acquire retries with its backoff ([WithBackoff]), capped by the
// remaining TTL of the member that stopped it; it does not listen for
// releases, since the release of one member says nothing of the others.
//
// Its methods are safe for concurrent use, but one MultiLock holds its keys
// at most once at a time. A MultiLock needs [ReleaseScript], and cannot be
// fair ([WithFair]), re-entrant ([WithOwner]), use [WithReplicaAck], listen
// for releases ([WithNotify]) or write holder info ([WithHolderInfo],
// [WithMetadata]): those, given to [Client.NewMultiLock], are [ErrInvalid]
// (set on the Client, a MultiLock ignores them), as are an empty key list,
// an empty key and a key listed twice, reported by every verb.
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

// multiKind is a MultiLock as the engine sees it (lease.Kind).
type multiKind MultiLock

func (k *multiKind) Token() (string, error) { return lease.NewToken() }

func (k *multiKind) CheckTTL(ttl time.Duration) error { return (*kind)(nil).CheckTTL(ttl) }

// Try takes the slot groups in order with token, which no other attempt
// carries (lease.Fresh). When a group is held by someone else, or
// its call fails, the attempt backs out before it reports: it releases the
// groups it took and undoes the group whose call failed (see backOut), so
// a waiting MultiLock holds no member between attempts.
func (k *multiKind) Try(ctx context.Context, token string) lease.Attempt {
	m := (*MultiLock)(k)
	start := time.Now()
	fences := make(map[string]int64, len(m.keys))
	for i, g := range m.groups {
		r, err := m.acquireGroup(ctx, g, token)
		if err != nil {
			if kerr := kindReply(m.hd.Keys.User, err, "mutex"); kerr != nil {
				// The script refused before it set anything in group i.
				return m.backOut(ctx, token, i, lease.Attempt{Err: kerr, Final: true})
			}
			// The call may have reached Redis and taken group i.
			return m.backOut(ctx, token, i+1, lease.Attempt{Err: err, Final: !retryable(err)})
		}
		if r[0] == 0 {
			return m.backOut(ctx, token, i, lease.Attempt{PTTL: time.Duration(r[1]) * time.Millisecond})
		}
		for j := range g {
			fences[g[j].User] = r[j+1]
		}
	}
	m.mu.Lock()
	m.token, m.fences = token, fences
	m.mu.Unlock()
	return lease.Attempt{OK: true, Fence: fences[m.keys[0]], Sent: start}
}

// acquireGroup runs multi_acquire.lua for token on slot group g and checks
// the shape of its reply.
func (m *MultiLock) acquireGroup(ctx context.Context, g []luascripts.Keys, token string) ([]int64, error) {
	keys := make([]string, 0, 2*len(g))
	for j := range g {
		keys = append(keys, g[j].AcquireKeys()...)
	}
	r, err := luascripts.MultiAcquire.Run(ctx, m.cfg.c.rdb, keys,
		token, ttlArg(m.cfg.ttl), flag(m.cfg.fencing)).Int64Slice()
	if err == nil && (len(r) < 1 || r[0] == 1 && len(r) != len(g)+1 || r[0] == 0 && len(r) != 2) {
		err = errors.New("lock: unexpected multi-lock acquire reply")
	}
	return r, err
}

// Undo releases every member an attempt with token may have taken.
func (k *multiKind) Undo(ctx context.Context, token string) {
	m := (*MultiLock)(k)
	_ = m.releaseOrLater(ctx, token, m.groups)
}

// Release releases every member of h.
// A member found gone that an operator force-released is reported so.
func (k *multiKind) Release(ctx context.Context, h *lease.Hold, _ bool) lease.Outcome {
	m := (*MultiLock)(k)
	out := []lease.Outcome{outcome(m.release(ctx, h.Token()))}
	markForcedBy(ctx, m.cfg.c.rdb, []*lease.Hold{h}, out, m.forceRecords)
	return out[0]
}

// Extend sets the TTL of every member of h, if all are ours.
func (k *multiKind) Extend(ctx context.Context, h *lease.Hold, ttl time.Duration) (lease.Outcome, <-chan struct{}) {
	var o [1]lease.Outcome
	multiGroup{(*MultiLock)(k)}.Renew(ctx, []*lease.Hold{h}, []time.Duration{ttl}, o[:])
	return o[0], nil
}

// release runs multi_release.lua for token on every slot group, in one
// pipeline, each call sent once. The worst status of the groups wins. The
// groups whose call failed are released again in the background.
func (m *MultiLock) release(ctx context.Context, token string) (extendStatus, error) {
	cmds := m.sendRelease(ctx, token, m.groups)
	st, err := worst("release", cmds)
	if err != nil {
		m.releaseLater(token, m.failed(cmds, m.groups))
	}
	return st, err
}

// sendRelease sends multi_release.lua for token on each of groups, in one
// pipeline, each call sent once, and returns one command per group.
func (m *MultiLock) sendRelease(ctx context.Context, token string, groups [][]luascripts.Keys) []*redis.Cmd {
	calls := make([]luascripts.Call, len(groups))
	s, src := m.cfg.c.pub.script(ctx, luascripts.MultiRelease, luascripts.MultiReleaseSrc)
	for i, g := range groups {
		keys := make([]string, 0, 2*len(g))
		for j := range g {
			keys = append(keys, g[j].ReleaseKeys()...)
		}
		calls[i] = luascripts.Call{Script: s, Src: src, Keys: keys, Args: []any{token}}
	}
	return luascripts.EvalAllOnce(ctx, m.cfg.c.rdb, calls)
}

// worst reads one status per slot group and returns the worst: an error,
// then stolen, then gone.
func worst(op string, cmds []*redis.Cmd) (extendStatus, error) {
	st := extendOK
	for _, cmd := range cmds {
		n, err := cmd.Int64()
		s, err := checkStatus(op, n, err)
		if err != nil {
			return 0, err
		}
		if s == extendStolen || s == extendGone && st == extendOK {
			st = s
		}
	}
	return st, nil
}

// forceRecords names the force record of every member (forcerelease.lua).
func (m *MultiLock) forceRecords(*lease.Hold) []string {
	out := make([]string, 0, len(m.keys))
	for _, g := range m.groups {
		for j := range g {
			out = append(out, g[j].Forced())
		}
	}
	return out
}

// multiGroup renews the holds of one MultiLock: for each, one
// multi_extend.lua per slot group, all in one pipeline. The slot groups
// are extended one by one, not at once: a hold that one group finds gone
// or taken is lost, and its members in the other groups, which that call
// may have extended, are released before Renew returns (releaseLost).
type multiGroup struct{ m *MultiLock }

// Renew extends every hold hs[i] to ttls[i].
func (g multiGroup) Renew(ctx context.Context, hs []*lease.Hold, ttls []time.Duration, out []lease.Outcome) {
	m := g.m
	var calls []luascripts.Call
	for i, h := range hs {
		for _, grp := range m.groups {
			keys := make([]string, 0, 2*len(grp))
			for j := range grp {
				keys = append(keys, grp[j].Lock())
				if m.cfg.fencing {
					keys = append(keys, grp[j].Fence()) // kept alive with the lock
				}
			}
			calls = append(calls, luascripts.Call{Script: luascripts.MultiExtend, Keys: keys,
				Args: []any{h.Token(), ms(ttls[i]), flag(m.cfg.fencing)}})
		}
	}
	cmds := luascripts.EvalAll(ctx, m.cfg.c.rdb, calls)
	n := len(m.groups)
	for i := range hs {
		out[i] = outcome(renewed(cmds[i*n : (i+1)*n]))
	}
	// A member gone because an operator force-released it, the force
	// message missed, is reported force-released, not vanished.
	markForcedBy(ctx, m.cfg.c.rdb, hs, out, m.forceRecords)
	for i, h := range hs {
		if s := out[i].Status; s == lease.Gone || s == lease.Stolen || s == lease.Forced {
			// The hold is lost, but the other groups may have just been
			// extended: they go now, before the loss is reported.
			m.releaseLost(ctx, h.Token())
		}
	}
}
