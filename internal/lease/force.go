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
// of them, and looking through its holds, costs little.
//
// A hold exists in Redis from the moment its acquire's script ran, but in
// the Engine only once its reply came back and install registered it. A
// message for it may come in between, or before the force channel's
// subscription is confirmed (the Client's first hold, or after the
// connection broke), when no message reaches the process at all. Both are
// caught at install, at no cost to an acquire in the common case:
//
//   - A force message that names no registered hold is remembered for a
//     while (Engine.heard), and install looks its token up there (screen):
//     a message heard after the acquire was sent is for this hold, which is
//     reported lost, force-released, once its acquire is (Handle.settle).
//     Unless an earlier call of the same Acquire, of unknown outcome, sent
//     the token too: the message may be for the hold that call took, and
//     the hold is asked about in Redis instead (as below), a loss found
//     reported force-released; so is a message naming such a hold once it
//     is installed (Engine.named).
//   - The force channel keeps when its subscription was confirmed
//     (channelState.heard; 0 while it is not, reset when the connection
//     breaks). A hold whose acquire was sent before that moment, or before
//     a remembered message was forgotten, may have missed its message: the
//     renewal loop asks Redis about it at once (Engine.owe), with a renewal
//     sent after the confirmation; one installed while the channel is not
//     confirmed yet is asked about once the confirmation comes (heardAll).
//     That renewal finds the key gone (force-released) or someone else's
//     (stolen), as a later renewal would. Without the watchdog too: the
//     check renews the hold once, its lease then counting from the check.
//
// A break of the pub/sub connection is seen only when its read fails: a
// message published after the break, before that, is missed, and the loss
// left to the hold's next renewal (with the watchdog off, its deadline).

// forceMemory is how long a force message that named no hold of the
// Engine is remembered for a hold not yet installed, and forceMemoryCap
// how many are at most: a hold whose acquire was sent before a message
// forgotten since is asked about in Redis instead (screen).
const (
	forceMemory    = 5 * time.Second
	forceMemoryCap = 1024
)

// listen counts one more hold on channel, its force channel, subscribing
// if needed, so that a force message for its token reaches this process,
// and returns the channel's state; nil once the Client is closed. It starts
// no goroutine when the channel is subscribed already. The hold calls
// unlisten once, when it ends.
func (n *Notifier) listen(channel string) *channelState {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.e.Closed() {
		return nil
	}
	cs := n.channelLocked(channel)
	cs.holds++
	cs.force = true
	n.subscribeOnce(cs)
	return cs
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

// forced handles a force message for token on channel: it wakes the
// longest waiter (the key's channel: the key is free), and on a force
// channel reports the hold of token lost, or, with none registered,
// remembers the token for a hold still to be installed (screen). The token
// is remembered first and the count of holds read after: a hold counted
// too late to be looked for has been registered too late to miss it.
func (n *Notifier) forced(channel, token string) {
	n.mu.Lock()
	cs := n.chans[channel]
	force := cs != nil && cs.force
	if cs != nil {
		cs.signalHead()
		cs.wakeWatches()
	}
	n.mu.Unlock()
	if !force {
		return
	}
	n.e.heard(token)
	n.mu.Lock()
	held := cs.holds > 0
	n.mu.Unlock()
	// Outside n.mu: holdOf takes the Engine's mu, and the loss runs its
	// callbacks.
	if !held {
		return
	}
	if h := n.e.holdOf(token, channel); h != nil && !n.e.named(h) {
		n.e.forceLost(h)
	}
}

// named handles a force message naming h, registered, whose token an
// earlier call of its acquisition may have set (reused): the message may be
// for that earlier hold, heard late, so h is asked about in Redis at once,
// a loss found reported as force-released (see screen). It reports whether
// it did; false for any other hold, which the message is for.
func (e *Engine) named(h *Hold) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := h.x.Load()
	if x == nil || !x.reused || !h.registered {
		return false
	}
	x.named = true
	e.owe(h, monoNow())
	return true
}

// heard remembers a force message for token, heard now, for a hold not
// installed yet (screen). Callers hold no lock.
func (e *Engine) heard(token string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := monoNow()
	if len(e.forced) >= forceMemoryCap || (len(e.forced) > 0 && between(e.forcedLast, now) > forceMemory) {
		e.forget()
	}
	if e.forced == nil {
		e.forced = map[string]int64{}
	}
	e.forced[token] = now
	e.forcedLast = now
}

// forget drops every remembered force message; a hold whose acquire was
// sent before the last of them is asked about in Redis when it is
// installed (screen). Callers hold e.mu.
func (e *Engine) forget() {
	e.forgot = e.forcedLast
	clear(e.forced)
}

// screen looks, as h enters renewal, for a force message h may have missed
// (see the comment at the top of this file): one remembered marks it
// forced, and it is reported lost once its acquire is (Handle.settle); a
// channel confirmed only after h's acquire was sent, or a message
// forgotten since, makes the renewal loop ask Redis about it at once. A
// channel not confirmed yet asks about it when the confirmation comes
// (heardAll): h is registered before screen reads the channel's state, so
// either screen sees the confirmation or heardAll sees h. Callers hold
// e.mu.
func (e *Engine) screen(h *Hold, cs *channelState) {
	if len(e.forced) > 0 {
		if between(e.forcedLast, monoNow()) > forceMemory {
			e.forget()
		} else if at, ok := e.forced[h.token]; ok && at >= h.sentAt {
			// Heard after the acquire was sent: for this hold. (One heard
			// before is for an earlier hold of the token, before a retry of
			// the same Acquire took the key again.)
			delete(e.forced, h.token)
			if x := h.x.Load(); x != nil && x.reused {
				// Maybe for the hold an earlier call with this token
				// took, force-released before this one landed: Redis says.
				x.named = true
				e.owe(h, monoNow())
				return
			}
			h.more().forced = true
			return
		}
	}
	since := cs.heard.Load()
	if since != 0 && (since > h.sentAt || e.forgot >= h.sentAt) {
		e.owe(h, monoNow())
	}
}

// owe makes the renewal loop ask Redis about h at once, and again until a
// write sent at from or later is confirmed (checkedBy). A hold in the heap
// is moved to the front, and a hold not in the heap yet (add) is put there
// due now. One whose renewal is out is asked again once that is answered,
// however early or late that renewal read the clock: it was taken out to
// be sent before now. Callers hold e.mu.
func (e *Engine) owe(h *Hold, from int64) {
	x := h.more()
	x.owed, x.checkFrom = true, from
	if h.inFlight {
		x.checkFrom = never // set when the renewal out is answered (checkedBy)
		return
	}
	now := monoNow()
	if h.next <= now {
		return
	}
	h.next = now
	if h.index >= 0 {
		e.q.fix(int(h.index))
		if now < e.armed {
			e.wake()
		}
	}
}

// checkedBy reports whether h owes no check (owe) once a write of it sent
// at sent was confirmed, its answer applied at now, clearing the debt when
// that write settles it. Callers hold e.mu.
func (h *Hold) checkedBy(sent, now int64) bool {
	x := h.x.Load()
	switch {
	case x == nil || !x.owed:
		return true
	case x.checkFrom == never:
		// The renewal that was out when the check was owed: the next one,
		// sent after now, settles it.
		x.checkFrom = now
		return false
	case sent >= x.checkFrom:
		x.owed, x.named = false, false
		return true
	}
	return false
}

// owesCheck reports whether the renewal loop is to ask Redis about h (see
// owe), with the watchdog off too. Callers hold e.mu.
func (h *Hold) owesCheck() bool {
	x := h.x.Load()
	return x != nil && x.owed
}

// heardAll runs when channel's subscription is confirmed at since, after a
// time it was not (the first hold of the Client, or a broken connection):
// each hold listening on it may have missed its force message meanwhile,
// and is asked about in Redis at once (owe).
func (e *Engine) heardAll(channel string, since int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var hs []*Hold
	for _, x := range e.q {
		if x.h.hd.pol.Inbox == channel {
			hs = append(hs, x.h)
		}
	}
	for f := range e.flights {
		for _, h := range f.hs {
			if h.inFlight && h.registered && h.hd.pol.Inbox == channel {
				hs = append(hs, h)
			}
		}
	}
	for _, h := range hs {
		e.owe(h, since)
	}
}

// lossReason is lossReason's for h, which Redis no longer has, having
// said st of it: force-released when a force message named it before its
// install and the check that asked about it found it gone (screen).
// Callers hold e.mu.
func (h *Hold) lossReason(st Status, now int64) Reason {
	if x := h.x.Load(); x != nil && x.named {
		return LossForceReleased
	}
	return lossReason(st, now, h.capped(h.ttl), h.sentAt)
}

// settle reports h lost, force-released, if a force message for it came
// before it was installed (screen): after its acquire was reported, so an
// Observer sees the acquire first.
func (hd *Handle) settle(h *Hold) {
	x := h.x.Load()
	if x == nil {
		return // the common case: nothing was noted of h
	}
	e := hd.pol.Engine
	e.mu.Lock()
	forced := x.forced
	x.forced = false
	e.mu.Unlock()
	if forced {
		e.forceLost(h)
	}
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

// busy reports whether cs has waiters, holds or Watches listening, so it stays
// subscribed; an inbox is busy while its key channel is. Callers hold n.mu.
func (cs *channelState) busy() bool {
	cs = cs.owner()
	return len(cs.waiters) > 0 || cs.holds > 0 || len(cs.watches) > 0
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
