package lease

import (
	"math/rand/v2"
	"strconv"
)

// A Client's inbox on a key is a channel of its own in the key's slot,
// P{K}:notify:<id> (Notifier.Inbox), on which a FIFO kind's release
// (a fair lock's) sends the messages meant for one waiter (MsgGive,
// MsgTo): only the Client whose waiter the message names reads it, so a
// handoff wakes one reader goroutine instead of one per Client waiting on
// the key. Messages for every process ('released', force) stay on the
// key's channel. The inbox is subscribed, beside the key's channel, by
// the first queued waiter of the key in the Client, before its first
// attempt, and stays subscribed while the key's channel is in use; its
// channelState (of) holds no waiters and hands its messages and its
// confirmation to the key's.

// newID returns a Client's id: letters and digits, unique in practice.
func newID() string { return strconv.FormatUint(rand.Uint64(), 36) }

// ID returns the id of the Client whose Notifier n is: what its queued
// waiters name in their queue entries, so a release can reach their inbox.
func (n *Notifier) ID() string { return n.id }

// Inbox returns the Client's inbox on the key whose channel is channel:
// channel + ":" + ID.
func (n *Notifier) Inbox(channel string) string { return channel + ":" + n.id }

// inboxOf returns the state of cs's inbox, made on first need, and links
// the two (a channel forgotten by a sweep and made afresh is linked anew
// here). Callers hold n.mu.
func (n *Notifier) inboxOf(cs *channelState) *channelState {
	name := n.Inbox(cs.name)
	in := n.chans[name]
	if in == nil {
		in = &channelState{name: name}
		n.chans[name] = in
	}
	in.of, cs.inbox = cs, in
	return in
}

// owner returns the channel whose waiters cs's messages are for: cs, or
// the key's channel of an inbox.
func (cs *channelState) owner() *channelState {
	if cs.of != nil {
		return cs.of
	}
	return cs
}

// listening reports whether cs's subscription, and its inbox's if it has
// one, are confirmed. Callers hold n.mu.
func (cs *channelState) listening() bool {
	return cs.ready && (cs.inbox == nil || cs.inbox.ready)
}
