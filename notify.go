package lock

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lockutil"
)

// notifyIdle is how long a channel without waiters stays subscribed, so a
// key that is waited on again and again is not subscribed afresh each time.
const notifyIdle = 30 * time.Second

// notifier is the Client's pub/sub subscription. Waiters of a key join its
// channel (P{K}:notify); a release message wakes the longest-waiting of
// them, so each process sends one attempt per release instead of a herd.
// A waiter that gives up passes an unused wake-up on.
//
// A *redis.Ring gets one subscription per shard: a release publishes on the
// shard of its key, which is the shard of the channel's hash tag, and a
// Ring's shards pass no messages between them. Everything else shares one.
//
// No notifier lock is held across a go-redis call: one that blocks on the
// network or panics must not stall every release and Close. Nor does a
// waiter make one: subscribing happens on goroutines of the notifier.
type notifier struct {
	c     *Client
	wg    sync.WaitGroup // run and subscribe goroutines; Close waits for them a bounded time
	mu    sync.Mutex
	subs  map[*redis.Client]*subscription // by Ring shard; under nil otherwise
	chans map[string]*channelState

	// giftTaken, set only by tests (export_test.go), runs on a waiter's
	// goroutine after it took a handed-over hold, before it installs it.
	giftTaken func()
}

// subscription is one pub/sub connection, read by its own goroutine (run).
type subscription struct {
	ps *redis.PubSub
	// order serializes SUBSCRIBE and UNSUBSCRIBE on ps, so a channel swept
	// as idle and joined again at once is subscribed after it was
	// unsubscribed. It is taken before n.mu, never while n.mu is held.
	order sync.Mutex
}

type channelState struct {
	name       string
	sub        *subscription // the one it is subscribed on; nil before
	ready      bool          // Redis confirmed the subscription
	subscribed bool          // SUBSCRIBE sent or about to be
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
	// owed is set with each wake-up (and by a join that reports ready) and
	// cleared when the waiter next acts, with an attempt or on a gift:
	// until then it will try again by itself. Under n.mu; tests read it.
	owed bool
}

func (n *notifier) init(c *Client) {
	n.c = c
	n.chans = map[string]*channelState{}
	n.subs = map[*redis.Client]*subscription{}
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
// lookAgain says the caller makes one more attempt when ready, without a
// wake-up.
func (n *notifier) join(channel string, l *Lock, token string, lookAgain bool) (w *waiter, ready bool) {
	n.mu.Lock()
	if n.c.closed.Load() {
		n.mu.Unlock()
		return nil, false
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
	ready = cs.ready
	w.owed = ready && lookAgain
	if !cs.subscribed {
		cs.subscribed = true
		// Not on the waiter's goroutine: go-redis dials and greets the
		// server inside Subscribe, which against a stopped server lasts
		// until its read timeout (forever with ReadTimeout -1), and the
		// waiter must keep to its ctx. It sleeps on its backoff until the
		// confirmation wakes it (see confirmed). wg.Add under n.mu: close
		// takes n.mu after closed is set, so it sees every Add.
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if !n.subscribe(cs) {
				n.mu.Lock()
				cs.subscribed = false // the next join tries again
				n.mu.Unlock()
			}
		}()
	}
	n.mu.Unlock()
	return w, ready
}

// subscribe sends SUBSCRIBE for cs's channel on the subscription of its
// shard, reporting whether it went out.
func (n *notifier) subscribe(cs *channelState) bool {
	s := n.subscription(cs.name)
	if s == nil {
		return false
	}
	n.mu.Lock()
	cs.sub = s
	n.mu.Unlock()
	s.order.Lock()
	defer s.order.Unlock()
	return s.ps.Subscribe(n.c.ctx, cs.name) == nil
}

// subscription returns the subscription channel's messages arrive on,
// opening it and starting its goroutine on first need; nil when there is
// none to be had (every Ring shard down, the Client closed).
func (n *notifier) subscription(channel string) *subscription {
	var shard *redis.Client // nil but on a Ring
	if ring, ok := n.c.rdb.(*redis.Ring); ok {
		var err error
		if shard, err = ring.GetShardClientForKey(channel); err != nil {
			return nil
		}
	}
	n.mu.Lock()
	s := n.subs[shard]
	n.mu.Unlock()
	if s != nil {
		return s
	}
	ps := n.open(shard)
	if ps == nil {
		return nil
	}
	n.mu.Lock()
	if s = n.subs[shard]; s != nil || n.c.closed.Load() {
		// Another join opened one first, or Close came: ps never connected.
		n.mu.Unlock()
		_ = ps.Close()
		return s
	}
	s = &subscription{ps: ps}
	n.subs[shard] = s
	n.wg.Add(1) // under n.mu, so close either sees s or we saw closed
	n.mu.Unlock()
	go n.run(s)
	return s
}

// open returns a pub/sub connection subscribed to nothing yet (go-redis
// dials on the first SUBSCRIBE), to shard when it is not nil (a Ring's) and
// through the Client's redis client otherwise. A client that panics here (a
// *redis.Ring does when asked for no channel) leaves waiters to their
// backoff instead of crashing their Acquire.
func (n *notifier) open(shard *redis.Client) (ps *redis.PubSub) {
	defer func() {
		if r := recover(); r != nil {
			ps = nil
			if lg := n.c.cfg.logger; lg != nil {
				lg.Warn("wake-ups off: subscribe panicked",
					slog.String("client", fmt.Sprintf("%T", n.c.rdb)), slog.Any("panic", r))
			}
		}
	}()
	if shard != nil {
		return shard.Subscribe(n.c.ctx)
	}
	return n.c.rdb.Subscribe(n.c.ctx)
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
		undo = w.gift.mayHaveSet() // a held gift, or a retry of unknown outcome
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

// signal wakes w. Callers hold n.mu.
func signal(w *waiter) {
	w.owed = true
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

// run receives the messages of s until Close. go-redis reconnects and
// resubscribes by itself after a broken connection; the fresh confirmations
// wake every waiter of those channels, since a release may have been missed
// meanwhile. A connection go-redis closed for good (a Ring shard removed,
// the redis client closed) is dropped.
func (n *notifier) run(s *subscription) {
	defer n.wg.Done()
	ps := s.ps
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
			n.sweep(s)
			lastSweep = time.Now()
		}
		if err != nil {
			if isTimeout(err) {
				continue
			}
			if errors.Is(err, redis.ErrClosed) {
				n.drop(s)
				return
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

// sweep forgets the channels of s (or of none) that nobody has waited on
// for notifyIdle, and unsubscribes them. It holds s.order throughout, so a
// join that subscribes one of them afresh sends its SUBSCRIBE after the
// UNSUBSCRIBE, never before.
func (n *notifier) sweep(s *subscription) {
	s.order.Lock()
	defer s.order.Unlock()
	var idle []string
	n.mu.Lock()
	for name, cs := range n.chans {
		if (cs.sub == s || cs.sub == nil) && len(cs.waiters) == 0 && time.Since(cs.idleSince) >= notifyIdle {
			if cs.sub == s {
				idle = append(idle, name)
			}
			delete(n.chans, name)
		}
	}
	n.mu.Unlock()
	if len(idle) > 0 {
		_ = s.ps.Unsubscribe(n.c.ctx, idle...)
	}
}

// drop forgets s, closed for good: its channels are subscribed afresh by
// their next join; until then their waiters rely on their backoff.
func (n *notifier) drop(s *subscription) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, x := range n.subs {
		if x == s {
			delete(n.subs, k)
		}
	}
	for _, cs := range n.chans {
		if cs.sub == s {
			cs.sub, cs.subscribed, cs.ready = nil, false, false
		}
	}
}

// close ends every subscription, which unblocks their goroutines, and
// waits for those and the SUBSCRIBEs of joins at most lockutil.CloseWait.
// One still greeting a stopped server holds go-redis's PubSub mutex, which
// PubSub.Close needs, until the server answers or go-redis's read timeout
// passes; it ends then, after Close has returned (see
// lockutil.CloseBounded).
func (n *notifier) close() {
	n.mu.Lock()
	closers := make([]func() error, 0, len(n.subs))
	for _, s := range n.subs {
		closers = append(closers, s.ps.Close)
	}
	n.mu.Unlock()
	lockutil.CloseBounded(&n.wg, lockutil.CloseWait, closers...)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
