package lease

import "strings"

// The payloads a kind publishes on a lock's channel (P{K}:notify) say whom
// the message wakes in each process that waits on it. Any other payload
// wakes the longest-waiting waiter, as MsgReleased does, so a message from
// an older or newer version of the library still wakes someone.
const (
	// MsgReleased: the lock is free; wake the longest-waiting waiter, so
	// each process sends one attempt instead of a herd.
	MsgReleased = "released"
	// MsgAll: wake every waiter, as when a result every waiter wants was
	// stored (Once), or readers may all enter together.
	MsgAll = "all"
	// MsgTo is the prefix of a message for one waiter: "to:" and its token,
	// as a fair queue names its next in line. Waiters with another token
	// stay asleep; their backoff still bounds the wait.
	MsgTo = "to:"
	// MsgForce is the prefix of a force-release's message: "force:" and
	// the token of a hold it removed (force.go). The process holding it
	// reports it lost at once; every process wakes its longest waiter.
	MsgForce = "force:"
)

// deliver wakes the waiters of channel that payload names.
func (n *Notifier) deliver(channel, payload string) {
	if strings.HasPrefix(payload, MsgForce) {
		n.mu.Lock()
		var h *Hold
		if cs := n.chans[channel]; cs != nil {
			h = cs.forced(payload)
		}
		n.mu.Unlock()
		if h != nil {
			n.e.forceLost(h) // outside n.mu: it runs the loss's callbacks
		}
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.chans[channel]
	if cs == nil {
		return
	}
	switch {
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
	default:
		cs.signalHead()
	}
}
