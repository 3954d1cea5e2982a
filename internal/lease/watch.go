package lease

import (
	"slices"
	"time"
)

// Watch is a listener on a channel that is not waiting to acquire: every
// message on the channel wakes it, and so does every confirmation of the
// channel's subscription (a reconnect may have lost messages), but it
// never takes a waiter's turn (a release's wake-up or handoff goes to a
// waiter). Wake-ups are buffered one deep: several messages before the
// reader looks are one wake-up, and a slow reader blocks nobody. A kind
// whose state others follow (an election's observers) reads that state
// again on each wake-up. While it exists the channel stays subscribed.
type Watch struct {
	n  *Notifier
	cs *channelState
	ch chan struct{}
}

// Watch returns a new Watch of channel, subscribing it if needed; nil once
// the Engine is closed. Its caller calls Stop when done. It starts no
// goroutine when the channel is subscribed already.
func (n *Notifier) Watch(channel string) *Watch {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.e.Closed() {
		return nil
	}
	cs := n.channelLocked(channel)
	w := &Watch{n: n, cs: cs, ch: make(chan struct{}, 1)}
	cs.watches = append(cs.watches, w)
	n.subscribeOnce(cs)
	return w
}

// C returns the channel that fires after a message or a confirmation of
// the subscription; nil (never fires) for a nil Watch.
func (w *Watch) C() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.ch
}

// Listening reports whether the channel's subscription is confirmed now,
// so that a message published from now on wakes w; false for a nil Watch.
func (w *Watch) Listening() bool {
	if w == nil {
		return false
	}
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	return w.cs.ready && w.cs.heard.Load() != 0
}

// Stop removes w from its channel, which may then go idle. Safe to call
// more than once, and on a nil Watch.
func (w *Watch) Stop() {
	if w == nil {
		return
	}
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	cs := w.cs
	if i := slices.Index(cs.watches, w); i >= 0 {
		cs.watches = slices.Delete(cs.watches, i, i+1)
	}
	if !cs.busy() {
		cs.idleSince = time.Time{} // idle from now: the next sweep times it
	}
}

// wakeWatches wakes every Watch of cs. Callers hold n.mu.
func (cs *channelState) wakeWatches() {
	for _, w := range cs.watches {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}
