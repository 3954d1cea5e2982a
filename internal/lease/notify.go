package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifyIdle is how long a channel without waiters stays subscribed, so a
// key that is waited on again and again is not subscribed afresh each time.
// A sharded subscription (one per cluster slot) left with no channel is
// closed at the same sweep.
const notifyIdle = 30 * time.Second

// idleOverride, when not zero, replaces notifyIdle (tests: SetNotifyIdle).
var idleOverride atomic.Int64

// idleAfter returns notifyIdle, or the tests' override.
func idleAfter() time.Duration {
	if d := idleOverride.Load(); d != 0 {
		return time.Duration(d)
	}
	return notifyIdle
}

// closeWait bounds how long Close waits for the subscriptions to end.
const closeWait = 100 * time.Millisecond

// A subscribe that no source took is tried again after a pause, jittered,
// from retryMin doubling up to retryMax (see Notifier.subscribe).
const (
	retryMin = 10 * time.Millisecond
	retryMax = time.Second
)

// Source is a client a channel's messages arrive through. Equal Sources
// share one subscription (one pub/sub connection).
type Source interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// Sources returns the Sources of channel: the core's one client (a Ring's
// shard for the channel), redlock's every node. It returns none when none
// is at hand (every Ring shard down): the subscribe is tried again while
// the channel has waiters, and they rely on their backoff meanwhile.
type Sources func(channel string) []Source

// Notifier is a Client's pub/sub subscription. Waiters of a key join its
// channel (P{K}:notify); a release message wakes the longest-waiting of
// them, so each process sends one attempt per release instead of a herd.
// A waiter that gives up passes an unused wake-up on. A release in this
// process may also hand its hold straight to that waiter (handoff.go). A
// FIFO strategy's waiters also listen on the Client's inbox on the key
// (inbox.go), where a release in any process hands them the key by name.
//
// Subscribing happens on a goroutine of its own, and on one per source
// when a channel has several (redlock's nodes): a server that does not
// answer delays no Acquire, and no other server's subscriptions. No notifier lock is held across a go-redis
// call: one that blocks on the network or panics must not stall every
// release and Close.
type Notifier struct {
	e       *Engine
	sources Sources
	id      string         // the Client's id, naming its inboxes (inbox.go)
	wg      sync.WaitGroup // its goroutines; Close waits for them at most closeWait

	mu    sync.Mutex
	subs  map[Source]*subscription
	chans map[string]*channelState

	// giftTaken, set only by tests (SetGiftHook), runs on a waiter's
	// goroutine after it took a handed-over hold, before it installs it.
	giftTaken func()
	// readerWaits, set only by tests before the first subscribe, runs on a
	// subscription's reader (run) as it waits for the first subscribe.
	readerWaits func()
}

// subscription is one pub/sub connection, read by its own goroutine (run).
type subscription struct {
	ps *redis.PubSub
	// order serializes SUBSCRIBE and UNSUBSCRIBE on ps, so a channel swept
	// as idle and joined again at once is subscribed after it was
	// unsubscribed. It is taken before n.mu, never while n.mu is held.
	order sync.Mutex
	// slot is the source of a sharded subscription (SSUBSCRIBE); its
	// Client is nil for a classic one.
	slot SlotSource
	// retired is set, under n.mu, when s leaves n.subs: closed for good
	// (drop), or an idle sharded subscription closed by sweep. A subscribe
	// that picked s up before then opens a fresh one instead.
	retired bool
	// first is closed, under order, once the first subscribe on ps has
	// returned; run reads ps only then (see run).
	first chan struct{}
}

type channelState struct {
	name       string
	subs       []*subscription // those SUBSCRIBE was sent on
	subscribed bool            // a subscribe on every source was started, or waits to try again
	ready      bool            // a source confirmed the subscription
	confirms   int             // confirmations read, from every source (tests: Confirmations)
	waiters    []*Waiter
	watches    []*Watch // woken by every message and confirmation (watch.go)
	// retry, while a subscribe that no source took waits to try again,
	// makes it try at once: a join sends on it (subscribeOnce). Nil when
	// no subscribe waits.
	retry chan struct{}
	// idleSince is when a sweep first found the channel idle (no waiter,
	// no hold); zero until then, and again whenever it becomes idle anew,
	// so that leaving reads no clock (sweep).
	idleSince time.Time
	handoffs  int // consecutive direct handoffs (handoff.go)
	// holds counts this process's holds listening on the channel, their
	// Client's force channel, for a force-release (force.go); force marks a
	// channel holds have listened on.
	holds int
	force bool
	// heard is when the subscription was confirmed, a reading of the
	// clock, never 0 (heardNow): every message published since reaches
	// this process. 0 while it is not confirmed, and again once the
	// connection broke or the channel was unsubscribed (deafen). Holds
	// read it without n.mu (Engine.screen).
	heard atomic.Int64
	// inbox is the key channel's inbox, once a queued waiter joined; of is
	// an inbox's key channel, which its messages are for (inbox.go).
	inbox, of *channelState
}

// Waiter is one Acquire listening on a channel.
type Waiter struct {
	n  *Notifier
	cs *channelState
	ch chan struct{} // buffered 1: a wake-up is never lost, never doubled

	// For direct handoff (handoff.go): the waiting handle and its kind,
	// set by a strategy whose waiters may be handed a hold (HandOff,
	// FIFO), nil otherwise; claimable when a release in this process may
	// hand it one (HandOff); its token; state and gift under n.mu.
	hd        *Handle
	k         Kind
	claimable bool
	token     string
	state     int
	gift      Gift
	// ttl, for a waiter of the FIFO strategy, is its hold's TTL,
	// and sent when its last attempt began: a message may hand it a hold
	// (give). Under n.mu.
	ttl  time.Duration
	sent time.Time
	// owed is set with each wake-up (and by a join that reports ready) and
	// cleared when the waiter next acts, with an attempt or on a gift:
	// until then it will try again by itself. Under n.mu; tests read it.
	owed bool
}

func (n *Notifier) init(e *Engine, sources Sources) {
	n.e, n.sources = e, sources
	n.id = newID()
	n.chans = map[string]*channelState{}
	n.subs = map[Source]*subscription{}
}

// queued reports whether this process already has waiters on channel.
func (n *Notifier) queued(channel string) bool {
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
func (n *Notifier) join(channel string, hd *Handle, k Kind, token string, lookAgain bool) (w *Waiter, ready bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.e.Closed() {
		return nil, false
	}
	cs := n.channelLocked(channel)
	w = &Waiter{n: n, cs: cs, ch: make(chan struct{}, 1), token: token}
	cs.waiters = append(cs.waiters, w)
	hd.strategy().enlist(n, w, hd, k)
	ready = cs.listening()
	w.owed = ready && lookAgain
	n.subscribeOnce(cs)
	return w, ready
}

// channelLocked returns the state of channel, made when first asked for;
// the caller holds n.mu.
func (n *Notifier) channelLocked(channel string) *channelState {
	cs := n.chans[channel]
	if cs == nil {
		cs = &channelState{name: channel}
		n.chans[channel] = cs
	}
	return cs
}

// subscribeOnce starts subscribing cs's channel, on a goroutine of its own,
// unless that was done; a subscribe that waits to try again tries at once.
// Callers hold n.mu.
func (n *Notifier) subscribeOnce(cs *channelState) {
	if cs.subscribed {
		select {
		case cs.retry <- struct{}{}: // never, while cs.retry is nil
		default:
		}
		return
	}
	cs.subscribed = true
	n.wg.Add(1) // under n.mu: close either sees it or we saw closed
	go func() {
		defer n.wg.Done()
		defer n.e.Survive("subscribe")
		n.subscribe(cs)
	}()
}

// subscribe sends SUBSCRIBE for cs's channel on the subscription of each
// of its sources. When no source takes it (none at hand, or the SUBSCRIBE
// failed on each), it tries again after a pause (Backoff from retryMin to
// retryMax), or at once when a join asks, for as long as the channel has
// waiters or holds listening and the Client is open: the waiters joined
// already wait for the confirmation to wake them, and a hold's force-release
// message would be missed. It then leaves the channel unsubscribed, and the
// next join or listen starts afresh.
func (n *Notifier) subscribe(cs *channelState) {
	for attempt := 0; !n.subscribeSources(cs); attempt++ {
		kick := n.retryWait(cs)
		if kick == nil {
			return
		}
		t := time.NewTimer(Backoff(retryMin, retryMax, attempt))
		select {
		case <-n.e.ctx.Done():
			t.Stop()
			return
		case <-kick:
		case <-t.C:
		}
		t.Stop()
	}
	n.mu.Lock()
	cs.retry = nil
	n.mu.Unlock()
}

// subscribeSources sends SUBSCRIBE for cs's channel on the subscription of
// each of its sources, and reports whether one of them took it. Each source
// is subscribed on a goroutine of its own, so a source that does not answer
// (go-redis dials and greets a stopped server until its read timeout, for
// ever with ReadTimeout -1) delays only its own subscriptions: it returns
// once one source took the channel, or every source failed. A source still
// subscribing then goes on by itself, and adds the channel when it answers.
func (n *Notifier) subscribeSources(cs *channelState) bool {
	srcs := n.sources(cs.name)
	if len(srcs) == 1 {
		return n.subscribeOn(srcs[0], cs)
	}
	took := make(chan bool, len(srcs)) // room for all: a straggler never blocks
	for _, src := range srcs {
		n.wg.Add(1) // the caller's own count keeps wg above zero meanwhile
		go func() {
			defer n.wg.Done()
			ok := false
			defer func() { took <- ok }()
			defer n.e.Survive("subscribe")
			ok = n.subscribeOn(src, cs)
		}()
	}
	for range srcs {
		if <-took {
			return true
		}
	}
	return false
}

// retryWait returns the channel a join wakes cs's failed subscribe through
// (cs.retry), or nil when it is not to be tried again: the channel has no
// waiters or listening holds left (busy), or the Client closed. cs is then
// left unsubscribed.
func (n *Notifier) retryWait(cs *channelState) chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.e.Closed() || !cs.busy() {
		cs.subscribed, cs.retry = false, nil
		return nil
	}
	if cs.retry == nil {
		cs.retry = make(chan struct{}, 1)
	}
	return cs.retry
}

// subscribeOn sends SUBSCRIBE for cs's channel on the subscription of src,
// unless it was sent there already, and reports whether it is sent. A
// subscription retired as idle meanwhile is replaced by a fresh one.
func (n *Notifier) subscribeOn(src Source, cs *channelState) bool {
	for {
		s := n.subscription(src)
		if s == nil {
			return false
		}
		s.order.Lock()
		n.mu.Lock()
		retired, done := s.retired, slices.Contains(cs.subs, s)
		n.mu.Unlock()
		if retired {
			s.order.Unlock()
			continue // subscription no longer finds it in n.subs
		}
		ok := done || n.shielded("subscribe", func() error { return s.subscribe(n.e.ctx, cs.name) }) == nil
		s.firstSent()
		if ok && !done {
			n.mu.Lock()
			cs.subs = append(cs.subs, s)
			n.mu.Unlock()
		}
		s.order.Unlock()
		return ok
	}
}

// subscription returns the subscription of src, opening it and starting
// its goroutine on first need; nil when there is none to be had (the
// client panicked, the Client closed).
func (n *Notifier) subscription(src Source) *subscription {
	n.mu.Lock()
	s := n.subs[src]
	n.mu.Unlock()
	if s != nil {
		return s
	}
	ps := n.open(src)
	if ps == nil {
		return nil
	}
	n.mu.Lock()
	if s = n.subs[src]; s != nil || n.e.Closed() {
		// Another join opened one first, or Close came: ps never connected.
		n.mu.Unlock()
		_ = ps.Close()
		return s
	}
	s = &subscription{ps: ps, first: make(chan struct{})}
	s.slot, _ = src.(SlotSource)
	n.subs[src] = s
	n.wg.Add(1) // under n.mu, so close either sees s or we saw closed
	n.mu.Unlock()
	go n.run(s)
	return s
}

// open returns a pub/sub connection of src subscribed to nothing yet
// (go-redis dials on the first SUBSCRIBE). A client that panics here (a
// *redis.Ring does when asked for no channel) leaves waiters to their
// backoff instead of crashing.
func (n *Notifier) open(src Source) (ps *redis.PubSub) {
	defer func() {
		if r := recover(); r != nil {
			ps = nil
			if lg := n.logger(); lg != nil {
				lg.Warn("wake-ups off: subscribe panicked",
					slog.String("client", fmt.Sprintf("%T", src)), slog.Any("panic", r))
			}
		}
	}()
	return src.Subscribe(n.e.ctx)
}

// logger returns the logger of the Client's own policy, if any.
func (n *Notifier) logger() *slog.Logger { return n.e.Logger }

// wake returns the channel that fires when the waiter should try again; nil
// (never fires) for a nil waiter.
func (w *Waiter) wake() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.ch
}

// leave removes the waiter; a wake-up it did not use goes to the next one.
// A waiter leaving while a release hands it the hold marks itself gone, and
// the release undoes the handoff; one leaving with an unused handed-over
// hold undoes it here.
func (w *Waiter) leave() {
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
	cs := w.cs
	if i := slices.Index(cs.waiters, w); i >= 0 {
		cs.waiters = slices.Delete(cs.waiters, i, i+1)
	}
	select {
	case <-w.ch:
		cs.signalHead()
	default:
	}
	if len(cs.waiters) == 0 {
		cs.idleSince = time.Time{} // idle from now: the next sweep times it
		if cs.inbox != nil {
			cs.inbox.idleSince = time.Time{}
		}
	}
	n.mu.Unlock()
	if undo {
		w.undo()
	}
}

// signal wakes w. Callers hold n.mu.
func signal(w *Waiter) {
	w.owed = true
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// signalHead wakes the longest-waiting waiter not owed a wake-up already:
// one that is owed one will look again by itself, and a second message for
// it (two permits of a semaphore released back to back) would be lost. A
// waiter a release of this process is handing the lock to (claimed, or its
// gift waiting) is passed over too: it takes that hold, or is told to try
// by Settle, and the message would die with it. Callers hold n.mu.
func (cs *channelState) signalHead() {
	for _, w := range cs.waiters {
		if !w.owed && w.state != waiterClaimed && w.state != waiterGifted {
			signal(w)
			return
		}
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
