package lease

// Listener is a wait on a channel that no hold stands behind: a rate
// limiter's Wait, which has its units already and only wants to hear that
// they may be due sooner. It never takes a handoff; a release's message
// for "the longest waiter" may wake it, and it then looks once and waits
// again, as a lock's waiter does after losing a race.
type Listener struct{ w *Waiter }

// Listen joins channel, subscribing if needed, until Leave. Wake fires on
// each message for its waiters (MsgAll wakes every Listener), and once
// when the subscription is confirmed, if it was not yet. A Listener of a
// closed Engine never wakes.
func (n *Notifier) Listen(channel string) *Listener {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.e.Closed() {
		return &Listener{}
	}
	cs := n.channelLocked(channel)
	w := &Waiter{n: n, cs: cs, ch: make(chan struct{}, 1)}
	cs.waiters = append(cs.waiters, w)
	n.subscribeOnce(cs)
	return &Listener{w: w}
}

// Wake returns the channel that fires when the Listener should look again;
// nil (never fires) for a Listener of a closed Engine.
func (l *Listener) Wake() <-chan struct{} { return l.w.wake() }

// Looked tells that the Listener has looked since its last wake-up, so
// that a message for the longest waiter wakes it again.
func (l *Listener) Looked() {
	if l.w == nil {
		return
	}
	n := l.w.n
	n.mu.Lock()
	l.w.owed = false
	n.mu.Unlock()
}

// Leave ends the Listener; a wake-up it did not use goes to the next
// waiter of the channel.
func (l *Listener) Leave() { l.w.leave() }
