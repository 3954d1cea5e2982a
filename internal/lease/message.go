package lease

import (
	"strconv"
	"strings"
	"time"
)

// The payloads a kind publishes on a lock's channel (P{K}:notify), or on a
// Client's inbox on it (P{K}:notify:<id>, inbox.go), say whom the message
// wakes in each process that waits on it. Any other payload wakes the
// longest-waiting waiter, as MsgReleased does, so a message from an older
// or newer version of the library still wakes someone.
const (
	// MsgReleased: the lock is free; wake the longest-waiting waiter, so
	// each process sends one attempt instead of a herd.
	MsgReleased = "released"
	// MsgAll: wake every waiter, as when a result every waiter wants was
	// stored (Once), or readers may all enter together.
	MsgAll = "all"
	// MsgTo is the prefix of a message for one waiter: "to:" and its token,
	// as a fair queue names its next in line, on its Client's inbox
	// (inbox.go). Waiters with another token stay asleep; their backoff
	// still bounds the wait.
	MsgTo = "to:"
	// MsgGive is the prefix of a message that hands one waiter the lock:
	// "give:", its token, ':' and the new hold's fence, as a fair queue's
	// release sets the key to its head's token; sent on the waiter's
	// Client's inbox (inbox.go), so no other Client reads it. The waiter
	// takes the hold without a call of its own when it is between attempts
	// and its last attempt was sent recently enough (Waiter.give);
	// otherwise it is woken and its next attempt finds the key holding its
	// token.
	MsgGive = "give:"
	// MsgForce is the prefix of a force-release's message: "force:" and
	// the token of a hold it removed (force.go). The process holding it
	// reports it lost at once; every process wakes its longest waiter.
	MsgForce = "force:"
	// MsgWatch wakes the Watches of the channel only (watch.go): a change
	// that frees nothing, such as a new holder or a new value, which
	// waiters need not hear. Every message wakes them.
	MsgWatch = "watch"
)

// deliver wakes the waiters of channel that payload names; a message on
// an inbox is for the waiters of its key's channel.
func (n *Notifier) deliver(channel, payload string) {
	if strings.HasPrefix(payload, MsgForce) {
		n.forced(channel, payload[len(MsgForce):])
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.chans[channel]
	if cs == nil {
		return
	}
	cs.wakeWatches() // an inbox has none
	cs = cs.owner()  // an inbox's messages are for its key's waiters
	switch {
	case payload == MsgWatch:
	case payload == MsgAll:
		for _, w := range cs.waiters {
			signal(w)
		}
	case strings.HasPrefix(payload, MsgTo):
		token := payload[len(MsgTo):]
		for _, w := range cs.waiters {
			if w.token == token {
				signal(w)
				return
			}
		}
	case strings.HasPrefix(payload, MsgGive):
		rest := payload[len(MsgGive):]
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			return
		}
		fence, err := strconv.ParseInt(rest[i+1:], 10, 64)
		for _, w := range cs.waiters {
			if w.token == rest[:i] {
				if err == nil {
					w.give(fence)
				}
				signal(w)
				return
			}
		}
	default:
		cs.signalHead()
	}
}

// give hands w a hold a release set in Redis under w's token, with fence,
// if w is between attempts and its last attempt was sent less than half
// its TTL ago. That attempt was answered before the release ran (an
// attempt that ran after it would have found the key ours), so the hold's
// lease counts from that attempt's sending, a time no later than the
// release. Callers hold n.mu.
func (w *Waiter) give(fence int64) {
	if w.state != waiterIdle || w.ttl <= 0 || w.sent.IsZero() || time.Since(w.sent) >= w.ttl/2 {
		return
	}
	w.gift, w.state = Gift{Fence: fence, Sent: w.sent}, waiterGifted
}
