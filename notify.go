package lock

import (
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifyIdle is how long a channel without waiters stays subscribed, so a
// key that is waited on again and again is not subscribed afresh each time.
const notifyIdle = 30 * time.Second

// notifier is the Client's one pub/sub subscription. Waiters of a key join
// its channel (P{K}:notify); a release message wakes the longest-waiting of
// them, so each process sends one attempt per release instead of a herd.
// A waiter that gives up passes an unused wake-up on.
type notifier struct {
	c       *Client
	mu      sync.Mutex
	ps      *redis.PubSub
	started bool
	chans   map[string]*channelState

	// giftTaken, set only by tests (export_test.go), runs on a waiter's
	// goroutine after it took a handed-over hold, before it installs it.
	giftTaken func()
}

type channelState struct {
	name       string
	ready      bool // Redis confirmed the subscription
	subscribed bool // SUBSCRIBE sent
	waiters    []*waiter
	idleSince  time.Time
	handoffs   int // consecutive direct handoffs (handoff.go)
}

// waiter is one Acquire listening on a channel.
type waiter struct {
	n  *notifier
	cs *channelState
	ch chan struct{} // buffered 1: a wake-up is never lost, never doubled

	// For direct handoff (handoff.go): the waiting Lock and its token, nil
	// when it cannot take a handed-over hold; state and gift under n.mu.
	l     *Lock
	token string
	state int
	gift  gift
}

func (n *notifier) init(c *Client) {
	n.c = c
	n.chans = map[string]*channelState{}
}

// queued reports whether this process already has waiters on channel.
func (n *notifier) queued(channel string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.chans[channel]
	return cs != nil && len(cs.waiters) > 0
}

// join adds a waiter to channel, subscribing if needed. ready reports that
// the subscription is confirmed, so any release from now on wakes someone;
// when it is not, the waiter is woken once the confirmation arrives.
func (n *notifier) join(channel string, l *Lock, token string) (w *waiter, ready bool) {
	n.mu.Lock()
	if n.c.closed.Load() {
		n.mu.Unlock()
		return nil, false
	}
	if !n.started {
		n.started = true
		n.ps = n.c.rdb.Subscribe(n.c.ctx)
		n.c.wg.Add(1)
		go n.run(n.ps)
	}
	cs := n.chans[channel]
	if cs == nil {
		cs = &channelState{name: channel}
		n.chans[channel] = cs
	}
	w = &waiter{n: n, cs: cs, ch: make(chan struct{}, 1), token: token}
	if handoffWaiter(l) {
		w.l = l
	}
	cs.waiters = append(cs.waiters, w)
	subscribe := !cs.subscribed
	cs.subscribed = true
	ready = cs.ready
	ps := n.ps
	n.mu.Unlock()
	if subscribe {
		if err := ps.Subscribe(n.c.ctx, channel); err != nil {
			n.mu.Lock()
			cs.subscribed = false // the next join tries again
			n.mu.Unlock()
		}
	}
	return w, ready
}

// wake returns the channel that fires when the waiter should try again; nil
// (never fires) for a nil waiter.
func (w *waiter) wake() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.ch
}

// leave removes the waiter; a wake-up it did not use goes to the next one.
// A waiter leaving while a release hands it the hold marks itself gone, and
// the release undoes the handoff; one leaving with an unused handed-over
// hold undoes it here.
func (w *waiter) leave() {
	if w == nil {
		return
	}
	n := w.n
	n.mu.Lock()
	var undo bool
	switch w.state {
	case waiterClaimed:
		w.state = waiterGone
	case waiterGifted:
		undo = true // a held gift, or a retry of unknown outcome: undo both
		w.state = waiterGone
	}
	w.leaveLocked()
	n.mu.Unlock()
	if undo {
		w.undo()
	}
}

func (w *waiter) leaveLocked() {
	cs := w.cs
	for i, x := range cs.waiters {
		if x == w {
			cs.waiters = append(cs.waiters[:i], cs.waiters[i+1:]...)
			break
		}
	}
	select {
	case <-w.ch:
		cs.signalHead()
	default:
	}
	if len(cs.waiters) == 0 {
		cs.idleSince = time.Now()
	}
}

func signal(w *waiter) {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// signalHead wakes the longest-waiting waiter. Callers hold n.mu.
func (cs *channelState) signalHead() {
	if len(cs.waiters) > 0 {
		signal(cs.waiters[0])
	}
}

// run receives messages until Close. go-redis reconnects and resubscribes by
// itself after a broken connection; the fresh confirmations wake every waiter
// of those channels, since a release may have been missed meanwhile.
func (n *notifier) run(ps *redis.PubSub) {
	defer n.c.wg.Done()
	pause := time.NewTimer(0)
	defer pause.Stop()
	<-pause.C
	lastSweep := time.Now()
	failures := 0
	for {
		msg, err := ps.ReceiveTimeout(n.c.ctx, notifyIdle/3)
		if n.c.ctx.Err() != nil {
			return
		}
		if time.Since(lastSweep) >= notifyIdle/3 {
			n.sweep(ps)
			lastSweep = time.Now()
		}
		if err != nil {
			if isTimeout(err) {
				continue
			}
			// The connection is down: wait before go-redis redials.
			failures++
			pause.Reset(min(time.Duration(failures)*50*time.Millisecond, time.Second))
			select {
			case <-n.c.ctx.Done():
				return
			case <-pause.C:
			}
			continue
		}
		failures = 0
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				n.confirmed(m.Channel)
			}
		case *redis.Message:
			n.mu.Lock()
			if cs := n.chans[m.Channel]; cs != nil {
				cs.signalHead()
			}
			n.mu.Unlock()
		}
	}
}

// confirmed marks channel ready and wakes all its waiters: each joined
// before it listened, so each looks once more.
func (n *notifier) confirmed(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.chans[channel]
	if cs == nil {
		return
	}
	cs.ready = true
	for _, w := range cs.waiters {
		signal(w)
	}
}

// sweep unsubscribes channels nobody has waited on for notifyIdle. It
// sends UNSUBSCRIBE under n.mu, so a join cannot subscribe the same channel
// afresh in between and have its subscription undone.
func (n *notifier) sweep(ps *redis.PubSub) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var idle []string
	for name, cs := range n.chans {
		if len(cs.waiters) == 0 && time.Since(cs.idleSince) >= notifyIdle {
			idle = append(idle, name)
			delete(n.chans, name)
		}
	}
	if len(idle) > 0 {
		_ = ps.Unsubscribe(n.c.ctx, idle...)
	}
}

// close ends the subscription, which unblocks run.
func (n *notifier) close() {
	n.mu.Lock()
	ps := n.ps
	n.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
