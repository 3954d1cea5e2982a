package redlock

import (
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lockutil"
)

// notifier is the Client's pub/sub subscription on every node, started by
// the first waiter. A waiter joins its key's channel (P{K}:notify) and is
// woken by a release message from any node; a channel is subscribed while
// it has waiters. A missed message costs only the backoff sleep.
type notifier struct {
	c       *Client
	wg      sync.WaitGroup // the goroutines below that talk to the nodes; see close
	mu      sync.Mutex
	started bool
	ps      []*redis.PubSub
	chans   map[string][]*waiter

	nodeMu     []sync.Mutex          // serialises subscription changes per node
	subscribed []map[string]struct{} // by node, guarded by nodeMu
}

// waiter is one Acquire listening on a channel.
type waiter struct {
	n       *notifier
	channel string
	ch      chan struct{} // buffered 1: a wake-up is never lost, never doubled
}

func (n *notifier) init(c *Client) {
	n.c = c
	n.chans = map[string][]*waiter{}
}

// join adds a waiter to channel; nil after Close.
func (n *notifier) join(channel string) *waiter {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c.closed.Load() {
		return nil
	}
	if !n.started {
		n.started = true
		k := len(n.c.nodes)
		n.ps = make([]*redis.PubSub, k)
		n.nodeMu = make([]sync.Mutex, k)
		n.subscribed = make([]map[string]struct{}, k)
		for i, rdb := range n.c.nodes {
			n.ps[i] = rdb.Subscribe(n.c.ctx)
			n.subscribed[i] = map[string]struct{}{}
			ps := n.ps[i]
			n.c.spawn(&n.wg, func() { n.run(ps) })
		}
	}
	w := &waiter{n: n, channel: channel, ch: make(chan struct{}, 1)}
	first := len(n.chans[channel]) == 0
	n.chans[channel] = append(n.chans[channel], w)
	if first {
		n.resync()
	}
	return w
}

// resync brings every node's subscriptions in line with the waiters, each
// node on its own goroutine so that a slow node delays no other. Callers
// hold n.mu.
func (n *notifier) resync() {
	for i := range n.ps {
		n.c.spawn(&n.wg, func() { n.sync(i) })
	}
}

func (n *notifier) sync(i int) {
	n.nodeMu[i].Lock()
	defer n.nodeMu[i].Unlock()
	var add, drop []string
	n.mu.Lock()
	for ch := range n.chans {
		if _, ok := n.subscribed[i][ch]; !ok {
			add = append(add, ch)
		}
	}
	for ch := range n.subscribed[i] {
		if _, ok := n.chans[ch]; !ok {
			drop = append(drop, ch)
		}
	}
	n.mu.Unlock()
	ps, ctx := n.ps[i], n.c.ctx
	// go-redis records the channels even when the command fails and
	// subscribes them again when it reconnects, so failures are not retried.
	if len(add) > 0 {
		_ = ps.Subscribe(ctx, add...)
		for _, ch := range add {
			n.subscribed[i][ch] = struct{}{}
		}
	}
	if len(drop) > 0 {
		_ = ps.Unsubscribe(ctx, drop...)
		for _, ch := range drop {
			delete(n.subscribed[i], ch)
		}
	}
}

// run receives one node's messages until Close.
func (n *notifier) run(ps *redis.PubSub) {
	ctx := n.c.ctx
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		msg, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// The node is down: go-redis redials on the next Receive.
			t.Reset(200 * time.Millisecond)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			continue
		}
		if m, ok := msg.(*redis.Message); ok {
			n.wake(m.Channel)
		}
	}
}

// wake signals every waiter of channel.
func (n *notifier) wake(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range n.chans[channel] {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// close ends every subscription and waits for the goroutines that use them,
// at most lockutil.CloseWait; Close has begun, so no new one starts. A
// subscription stuck greeting a stopped node ends on its own when go-redis
// gives up or the node answers (see lockutil.CloseBounded).
func (n *notifier) close() {
	n.mu.Lock()
	ps := n.ps
	n.mu.Unlock()
	closers := make([]func() error, len(ps))
	for i, p := range ps {
		closers[i] = p.Close
	}
	lockutil.CloseBounded(&n.wg, lockutil.CloseWait, closers...)
}

// wake returns the channel that fires when the waiter should try again; nil
// (never fires) for a nil waiter.
func (w *waiter) wake() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.ch
}

// leave removes the waiter, unsubscribing its channel when it was the last.
func (w *waiter) leave() {
	if w == nil {
		return
	}
	n := w.n
	n.mu.Lock()
	defer n.mu.Unlock()
	ws := n.chans[w.channel]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) > 0 {
		n.chans[w.channel] = ws
		return
	}
	delete(n.chans, w.channel)
	n.resync()
}
