package lease

import "time"

// A force-release (an operator freeing a key whoever holds it) publishes
// MsgForce and the token of each hold it removed on the key's channel,
// which wakes waiters, and on the force channel every Client of that
// prefix listens on (Policy.Inbox). Each hold with an inbox is counted on
// that channel while it is held, which keeps the channel subscribed, so
// the message reaches its process at once; the Engine looks the token up
// among its holds (holdOf) and reports that hold lost (LossForceReleased)
// without waiting for its next renewal. One subscription serves every hold
// of a Client: holding a key costs no subscription of its own and no entry
// in an index by token (an acquire and a release would pay for it), and
// since force-releases are rare operator actions, every Client hearing each
// of them, and looking through its holds, costs little. A message missed
// (the subscription not yet confirmed, or down) leaves the loss to the
// hold's next renewal, which finds the key gone or someone else's.

// listen counts one more hold on channel, its force channel, subscribing
// if needed, so that a force message for its token reaches this process.
// It starts no goroutine when the channel is subscribed already. The hold
// calls unlisten once, when it ends.
func (n *Notifier) listen(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.e.Closed() {
		return
	}
	cs := n.chans[channel]
	if cs == nil {
		cs = &channelState{name: channel}
		n.chans[channel] = cs
	}
	cs.holds++
	n.subscribeOnce(cs)
}

// unlisten takes h off its force channel, if its Policy has one. A hold
// calls it once, when it ends (released or lost), after listen.
func (h *Hold) unlisten() {
	if h.hd.pol.Inbox != "" {
		h.hd.pol.Engine.Notifier.unlisten(h.hd.pol.Inbox)
	}
}

// unlisten takes one hold off channel; the channel may then go idle. Once
// the Client is closed nothing is counted any more: listen may have
// skipped the hold.
func (n *Notifier) unlisten(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.chans[channel]
	if cs == nil || cs.holds == 0 || n.e.Closed() {
		return
	}
	cs.holds--
	if cs.holds == 0 && len(cs.waiters) == 0 {
		cs.idleSince = time.Time{} // idle from now: the next sweep times it
	}
}

// forced wakes the longest waiter of cs, which a force message frees, and
// reports whether holds of this process listen on cs, one of which the
// message may name. Callers hold n.mu.
func (cs *channelState) forced() bool {
	cs.signalHead()
	return cs.holds > 0
}

// holdOf returns the hold of the Engine with token that listens on
// channel for force-releases, if it has one. It looks through every hold,
// those in the renewal heap and those whose renewal is out: a force message
// is a rare operator action, and so no hold pays for an index by token.
// The scan holds the Engine's mu for time linear in the Client's holds,
// once for each hold a force-release removed: about 1 µs at 1 000 holds,
// 0.24 ms at 100 000 (BenchmarkEngine_holdOf, medians of 3 runs on the
// 2-core VM; the first run of a process read up to 3 times that).
func (e *Engine) holdOf(token, channel string) *Hold {
	e.mu.Lock()
	defer e.mu.Unlock()
	match := func(h *Hold) bool {
		return h.registered && h.token == token && h.hd.pol.Inbox == channel
	}
	for _, x := range e.q {
		if match(x.h) {
			return x.h
		}
	}
	for f := range e.flights {
		for _, h := range f.hs {
			if h.inFlight && match(h) {
				return h
			}
		}
	}
	return nil
}

// busy reports whether cs has waiters or holds listening, so it stays
// subscribed; an inbox is busy while its key channel is. Callers hold n.mu.
func (cs *channelState) busy() bool {
	cs = cs.owner()
	return len(cs.waiters) > 0 || cs.holds > 0
}

// forceLost reports h lost to a force-release, taking it out of renewal.
// A Release of h already out is left to find the key gone and report it.
func (e *Engine) forceLost(h *Hold) {
	e.remove(h)
	h.markLost(LossForceReleased, nil)
}

// Listening reports whether channel's subscription is confirmed, and its
// inbox's if a queued waiter joined it, so that a message published from
// now on reaches this process (for tests).
func (n *Notifier) Listening(channel string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.chans[channel]
	return cs != nil && cs.listening()
}
