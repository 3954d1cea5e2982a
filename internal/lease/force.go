package lease

import (
	"strings"
	"time"
)

// A force-release (an operator freeing a key whoever holds it) publishes
// MsgForce and the token of each hold it removed on the key's channel,
// which wakes waiters, and on the force channel every Client of that
// prefix listens on (Policy.Inbox). Each hold with an inbox is registered
// on it while it is held, so the message reaches its process at once and
// the hold is reported lost (LossForceReleased) without waiting for its
// next renewal. One subscription serves every hold of a Client: holding a
// key costs no subscription of its own, and since force-releases are rare
// operator actions, every Client hearing each of them costs little. A message missed (the subscription not yet confirmed, or down)
// leaves the loss to that renewal, which finds the key gone or someone
// else's.

// listen registers h on channel, its force channel, subscribing if
// needed, so that a force message for its token reaches it. It starts no
// goroutine when the channel is subscribed already.
func (n *Notifier) listen(h *Hold, channel string) {
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
	if cs.holds == nil {
		cs.holds = map[string]*Hold{}
	}
	cs.holds[h.token] = h
	n.subscribeOnce(cs)
}

// unlisten takes h off its force channel, if its Policy has one; a hold
// never registered there (listen found the Notifier closed) is not found,
// and nothing changes.
func (h *Hold) unlisten() {
	if h.hd.pol.Inbox != "" {
		h.hd.pol.Engine.Notifier.unlisten(h)
	}
}

// unlisten takes h off its channel; the channel may then go idle.
func (n *Notifier) unlisten(h *Hold) {
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.chans[h.hd.pol.Inbox]
	if cs == nil || cs.holds[h.token] != h {
		return
	}
	delete(cs.holds, h.token)
	if len(cs.holds) == 0 && len(cs.waiters) == 0 {
		cs.idleSince = time.Time{} // idle from now: the next sweep times it
	}
}

// forced returns the hold a force message on cs names, if this process has
// it, and wakes the longest waiter: the key is free. Callers hold n.mu.
func (cs *channelState) forced(payload string) *Hold {
	cs.signalHead()
	return cs.holds[strings.TrimPrefix(payload, MsgForce)]
}

// busy reports whether cs has waiters or holds listening, so it stays
// subscribed; an inbox is busy while its key channel is. Callers hold n.mu.
func (cs *channelState) busy() bool {
	cs = cs.owner()
	return len(cs.waiters) > 0 || len(cs.holds) > 0
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
