package lease

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// run receives the messages of s until Close. go-redis reconnects and
// resubscribes by itself after a broken connection; the fresh confirmations
// wake every waiter of those channels, since a release may have been missed
// meanwhile. A connection go-redis closed for good (a Ring shard removed,
// the redis client closed) is dropped.
//
// It reads only once the first subscribe on s has returned: a read
// connects a PubSub that has no connection yet, and go-redis routes a
// sharded one by the slot of its first channel, one without a channel to a
// random node of the cluster. That can be the slot's replica, which takes
// the SSUBSCRIBE (the slot's master then counts no subscriber), or another
// master, which refuses it with MOVED. After that subscribe, the PubSub is
// connected, or keeps the channel for the redial.
func (n *Notifier) run(s *subscription) {
	defer n.wg.Done()
	defer n.e.Survive("wake-up reader") // an Observer told of a force-release, say
	ctx := n.e.ctx
	ps := s.ps
	if n.readerWaits != nil {
		n.readerWaits()
	}
	select {
	case <-s.first:
	case <-ctx.Done():
		return
	}
	pause := time.NewTimer(0)
	defer pause.Stop()
	<-pause.C
	lastSweep := time.Now()
	failures := 0
	for {
		msg, err := n.receive(ctx, ps)
		if ctx.Err() != nil {
			return
		}
		if time.Since(lastSweep) >= idleAfter()/3 {
			if n.sweep(s) {
				_ = ps.Close() // retired: an idle sharded subscription
				return
			}
			lastSweep = time.Now()
		}
		if err != nil {
			if n.failed(ctx, s, err, pause, &failures) {
				return
			}
			continue
		}
		failures = 0
		if n.handle(s, msg) {
			return
		}
	}
}

// failed deals with a failed read of s; failures counts them in a row. It
// reports that run ends: s was given up.
func (n *Notifier) failed(ctx context.Context, s *subscription, err error, pause *time.Timer, failures *int) (stop bool) {
	switch {
	case errors.Is(err, ErrPanicked):
		// go-redis may have panicked holding the PubSub's lock (a dial
		// hook's panic during its redial does): it is given up unclosed,
		// since Close would wait for that lock forever. Its channels are
		// subscribed afresh, on a new one, by their next join; until then
		// their waiters rely on their backoff.
		n.drop(s)
		return true
	case isTimeout(err):
		return false
	case errors.Is(err, redis.ErrClosed):
		n.drop(s)
		return true
	case s.sharded() && redis.HasErrorPrefix(err, "MOVED"):
		n.slotMoved(s) // the slot has another master now
		return true
	}
	// The connection is down: wait before go-redis redials. A sharded one
	// redials the slot's master as go-redis's slot map has it: have the
	// map reloaded, since a failover may have moved the slot (go-redis
	// reloads it on a failed command, and the waiters here send none while
	// they sleep).
	if s.sharded() {
		s.slot.Client.ReloadState(ctx)
	}
	n.deafen(s)
	*failures++
	pause.Reset(min(time.Duration(*failures)*50*time.Millisecond, time.Second))
	select {
	case <-ctx.Done():
		return true
	case <-pause.C:
		return false
	}
}

// handle acts on msg, read from s. It reports that run ends: the server
// gave s's slot away.
func (n *Notifier) handle(s *subscription, msg any) (stop bool) {
	switch m := msg.(type) {
	case *redis.Subscription:
		switch m.Kind {
		case "subscribe", "ssubscribe":
			n.confirmed(m.Channel)
		case "sunsubscribe":
			if n.listed(m.Channel, s) {
				// Not ours: the server gave the slot away.
				n.slotMoved(s)
				return true
			}
		}
	case *redis.Message:
		n.deliver(m.Channel, m.Payload)
	}
	return false
}

// receive reads ps's next message, waiting a third of idleAfter at most. A
// read that panics (a go-redis dial hook, say) returns an error matching
// ErrPanicked instead, logged (see Recovered): run then gives s up.
func (n *Notifier) receive(ctx context.Context, ps *redis.PubSub) (msg any, err error) {
	defer func() {
		if v := recover(); v != nil {
			msg, err = nil, Recovered(n.logger(), "wake-up read", v)
		}
	}()
	return ps.ReceiveTimeout(ctx, idleAfter()/3)
}

// shielded returns call's error, or, if it panics (a go-redis hook, say),
// an error matching ErrPanicked, logged (see Recovered): the panic fails
// the call, what, like any error would.
func (n *Notifier) shielded(what string, call func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = Recovered(n.logger(), what, v)
		}
	}()
	return call()
}

// confirmed marks channel ready and wakes all its waiters (an inbox's: its
// key channel's): each joined before it listened, so each looks once more.
// A force channel confirmed after a time it was not has its holds asked
// about in Redis (Engine.heardAll): their messages may have been missed.
func (n *Notifier) confirmed(channel string) {
	n.mu.Lock()
	cs := n.chans[channel]
	if cs == nil {
		n.mu.Unlock()
		return
	}
	cs.ready = true
	cs.confirms++
	for _, w := range cs.owner().waiters {
		signal(w)
	}
	cs.wakeWatches()
	since := heardNow()
	fresh := cs.heard.CompareAndSwap(0, since)
	held := cs.holds > 0
	n.mu.Unlock()
	if fresh && held {
		n.e.heardAll(channel, since)
	}
}

// heardNow is the clock's reading now, for channelState.heard: never 0.
func heardNow() int64 {
	if m := monoNow(); m != 0 {
		return m
	}
	return 1
}

// deafen marks every channel subscribed on s as no longer heard (see
// channelState.heard): its connection broke, and messages may be lost
// until the subscription is confirmed again.
func (n *Notifier) deafen(s *subscription) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, cs := range n.chans {
		if slices.Contains(cs.subs, s) {
			cs.heard.Store(0)
		}
	}
}

// sweep unsubscribes on s the channels nobody has waited on or held a
// key of since an earlier sweep at least notifyIdle ago, and forgets a
// channel subscribed nowhere any more. A channel that became idle is timed
// from the first sweep that finds it so: leaving it reads no clock, which
// a lone caller's every Release would pay. It holds s.order throughout, so
// a join that subscribes one of them afresh sends its SUBSCRIBE after the
// UNSUBSCRIBE, never before. A sharded s left with no channel is retired:
// dropped from n.subs, so a Client that waited on keys of many slots keeps
// no connection per slot once they are idle. It reports whether s was
// retired; its caller then closes it.
func (n *Notifier) sweep(s *subscription) (retired bool) {
	s.order.Lock()
	defer s.order.Unlock()
	var idle []string
	used := false
	now := time.Now()
	n.mu.Lock()
	for name, cs := range n.chans {
		i := slices.Index(cs.subs, s)
		if !cs.busy() && cs.idleSince.IsZero() {
			cs.idleSince = now // idle since the last sweep at most
		}
		if cs.busy() || now.Sub(cs.idleSince) < idleAfter() {
			used = used || i >= 0
			continue
		}
		if i >= 0 {
			cs.subs = slices.Delete(cs.subs, i, i+1)
			cs.subscribed = false // a join subscribes it on every source again
			cs.heard.Store(0)
			idle = append(idle, name)
		}
		if len(cs.subs) == 0 {
			delete(n.chans, name)
		}
	}
	if s.sharded() && !used {
		n.retire(s)
	}
	n.mu.Unlock()
	if len(idle) > 0 && !s.retired {
		_ = n.shielded("unsubscribe", func() error { return s.unsubscribe(n.e.ctx, idle...) })
	}
	return s.retired
}

// Subscriptions returns how many pub/sub connections n holds open,
// classic and sharded, for tests.
func (n *Notifier) Subscriptions() (classic, sharded int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.subs {
		if s.sharded() {
			sharded++
		} else {
			classic++
		}
	}
	return classic, sharded
}

// Confirmations reports, for tests, how many confirmations of channel's
// subscription n has read, from all its sources together; each has woken
// the channel's waiters by the time it counts.
func (n *Notifier) Confirmations(channel string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if cs := n.chans[channel]; cs != nil {
		return cs.confirms
	}
	return 0
}

// SetNotifyIdle sets how long an unused channel stays subscribed, for
// tests; it returns a func that restores the default.
func SetNotifyIdle(d time.Duration) (restore func()) {
	old := idleOverride.Swap(int64(d))
	return func() { idleOverride.Store(old) }
}

// retire takes s out of n.subs, so the next subscribe to its source opens
// a fresh one, and marks it retired for a subscribe that holds it already.
// Callers hold n.mu.
func (n *Notifier) retire(s *subscription) {
	s.retired = true
	for k, x := range n.subs {
		if x == s {
			delete(n.subs, k)
		}
	}
}

// drop forgets s, closed for good: its channels are subscribed afresh by
// their next join; until then their waiters rely on their backoff.
func (n *Notifier) drop(s *subscription) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.retire(s)
	for _, cs := range n.chans {
		if i := slices.Index(cs.subs, s); i >= 0 {
			cs.subs = slices.Delete(cs.subs, i, i+1)
			cs.subscribed = false
			cs.ready = cs.ready && len(cs.subs) > 0
			cs.heard.Store(0)
		}
	}
}

// close ends every subscription and waits for the Notifier's goroutines, at
// most closeWait; Close has begun, so no new one starts. go-redis holds a
// PubSub's mutex while it dials and greets its server, and PubSub.Close
// needs that mutex: against a stopped server it waits until go-redis's read
// timeout passes (never, with ReadTimeout -1). So each PubSub is closed on
// a goroutine of its own, and a subscription stuck on such a server ends on
// its own when go-redis gives up or the server answers.
func (n *Notifier) close() {
	n.mu.Lock()
	subs := make([]*subscription, 0, len(n.subs))
	for _, s := range n.subs {
		subs = append(subs, s)
	}
	for _, s := range subs {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			defer n.e.Survive("pub/sub close")
			_ = s.ps.Close()
		}()
	}
	n.mu.Unlock()
	waitFor(&n.wg, closeWait)
}

// listed reports whether channel is subscribed on s by this Notifier's
// account.
func (n *Notifier) listed(channel string, s *subscription) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.chans[channel]
	return cs != nil && slices.Contains(cs.subs, s)
}

// firstSent lets run read s: a subscribe on it has returned. Callers hold
// s.order.
func (s *subscription) firstSent() {
	select {
	case <-s.first:
	default:
		close(s.first)
	}
}

// sharded reports whether s listens with SSUBSCRIBE.
func (s *subscription) sharded() bool { return s.slot.Client != nil }

// subscribe sends SUBSCRIBE, or SSUBSCRIBE on a sharded subscription.
func (s *subscription) subscribe(ctx context.Context, channels ...string) error {
	if s.sharded() {
		return s.ps.SSubscribe(ctx, channels...)
	}
	return s.ps.Subscribe(ctx, channels...)
}

// unsubscribe sends UNSUBSCRIBE, or SUNSUBSCRIBE on a sharded subscription.
func (s *subscription) unsubscribe(ctx context.Context, channels ...string) error {
	if s.sharded() {
		return s.ps.SUnsubscribe(ctx, channels...)
	}
	return s.ps.Unsubscribe(ctx, channels...)
}
