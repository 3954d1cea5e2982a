package lock

import "github.com/agentlock/lock/internal/luascripts"

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
func IdleWaiters(c *Client, key string) int {
	k := luascripts.NewKeys(DefaultPrefix, key)
	n := &c.notifier
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.chans[k.Notify()]
	if cs == nil {
		return 0
	}
	idle := 0
	for _, w := range cs.waiters {
		if w.state == waiterIdle {
			idle++
		}
	}
	return idle
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
func OnGiftTaken(c *Client, fn func()) {
	c.notifier.mu.Lock()
	c.notifier.giftTaken = fn
	c.notifier.mu.Unlock()
}

// CoalescerLimit reports, for tests, how many sends a coalescer lets out
// at once before calls queue up.
func CoalescerLimit() int { return newCoalescer(nil).limit }
