package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
)

// WatchAcquire runs one script-free (ReleaseWatch) acquire attempt of key,
// under the default prefix, for token, as the retry of an attempt inside
// one Acquire does, and reports whether the key is ours.
func WatchAcquire(ctx context.Context, rdb redis.UniversalClient, key, token string, ttl time.Duration) (bool, error) {
	b := &watchBackend{rdb: rdb, fencing: true}
	k := luascripts.NewKeys(DefaultPrefix, key)
	r, err := b.acquire(ctx, &k, token, ttl)
	return r.ok, err
}

// CoalescerLoad reports, for tests, how many sends the Client's coalescers
// have out and how many calls wait in their queues, summed over the lanes
// (one per node on a cluster), and the lengths of the queues that are not
// empty.
func CoalescerLoad(c *Client) (out, queued int, queues []int) {
	c.beMu.Lock()
	ls := c.co
	c.beMu.Unlock()
	if ls == nil {
		return 0, 0, nil
	}
	ls.each(func(co *coalescer) {
		co.mu.Lock()
		defer co.mu.Unlock()
		out += co.out
		queued += len(co.queue)
		if len(co.queue) > 0 {
			queues = append(queues, len(co.queue))
		}
	})
	return out, queued, queues
}

// IdleWaiters reports, for tests, how many waiters of c wait on key (under
// the default prefix) between attempts: those a release can hand over to.
// A waiter counts once nothing but a release (or its backoff) will make it
// try again: no wake-up it has not acted on, and its channel's
// subscription confirmed (that wakes every waiter for one more attempt) or
// no longer under way (it failed).
func IdleWaiters(c *Client, key string) int {
	k := luascripts.NewKeys(DefaultPrefix, key)
	return c.eng.Notifier.IdleWaiters(k.Notify())
}

// each calls fn with every lane made so far.
func (ls *lanes) each(fn func(*coalescer)) {
	if ls.one != nil {
		fn(ls.one)
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, co := range ls.byNode {
		fn(co)
	}
}

// OnGiftTaken makes every waiter of c call fn after it takes a hold a
// release handed to it and before it installs that hold, so a test can hold
// that window open. Set it before any waiter of c starts.
func OnGiftTaken(c *Client, fn func()) { c.eng.Notifier.SetGiftHook(fn) }

// OnExtendWaits makes every Extend of c's holds call fn each time it waits
// for a renewal of its hold, out when the Extend began, to be applied, so a
// test can let that renewal go then. Set it before any Extend on c.
func OnExtendWaits(c *Client, fn func()) { c.eng.SetExtendWaitHook(fn) }

// CoalescerLimit reports, for tests, how many sends a coalescer lets out
// at once before calls queue up.
func CoalescerLimit() int { return newCoalescer(nil, nil).limit }

// newClientWithBackend returns a Client whose every lock talks to be (a
// fake Redis), without wake-ups: the one seam for the tests of the engine's
// use by the core. Call it inside a synctest bubble when be keeps time on
// the fake clock, and Close it there.
func newClientWithBackend(be backend, opts ...Option) *Client {
	c := NewClient(nil, append([]Option{WithNotify(false)}, opts...)...)
	c.err = nil
	for _, mode := range []ReleaseMode{ReleaseScript, ReleaseWatch} {
		for _, re := range []bool{false, true} {
			for _, fe := range []bool{false, true} {
				for _, co := range []bool{false, true} {
					c.backends[backendKind{mode, re, fe, co, false}] = be
					c.backends[backendKind{mode, re, fe, co, true}] = be
				}
			}
		}
	}
	c.set = c.settings(c.cfg)
	return c
}

// UnansweredAcquires reports, for tests, how many acquires of c left a
// shared pipeline before its reply and wait for it to finish.
func UnansweredAcquires(c *Client) int {
	c.beMu.Lock()
	defer c.beMu.Unlock()
	n := 0
	for _, be := range c.backends {
		if sb, ok := be.(*scriptBackend); ok {
			n += int(sb.n.Load())
		}
	}
	return n
}

// KeySlot is keySlot, the cluster slot a multi-lock sorts its keys by.
var KeySlot = keySlot

// InboxReady reports, for tests, whether c hears force-release messages
// for its holds now: its inbox subscription is confirmed.
func InboxReady(c *Client) bool {
	ch := c.forceChannel(c.cfg.prefix)
	return ch != "" && c.eng.Notifier.Listening(ch)
}

// OptionNames lists, for tests, the With… functions the option table
// (optionRules) has a row for.
func OptionNames() []string {
	names := make([]string, len(optionRules))
	for i := range optionRules {
		names[i] = optionRules[i].name
	}
	return names
}

// KindLabels lists, for tests, the kinds of lock the option table tells
// apart, as its errors name them.
func KindLabels() []string { return kindLabels[:] }

// ReservationDue returns, for tests, when r's units were due on the
// server's clock (microseconds), as its reservation or its wait last
// heard.
func ReservationDue(r *Reservation) int64 { return r.due }
