package lease

// Strategy is how a kind's Acquire waits, where kinds differ: when it
// starts listening for wake-ups and whether its first attempt goes out at
// once, which token each attempt carries and who undoes a failed one, and
// what a release in this process may hand its waiters. A kind picks one of
// the engine's strategies (Contend, HandOff, Eager, FIFO, Fresh) when its
// handle is made (Handle.Init); the wait loop asks it and never which kind
// it serves. Its methods are the engine's own.
type Strategy interface {
	// enter runs before an Acquire's first attempt; false ends the Acquire
	// with ErrClosed. leave runs on its way out when enter returned true.
	enter(e *Engine) bool
	leave(e *Engine)
	// open says whether an Acquire listens on channel before its first
	// attempt, and whether it makes that attempt at once anyway.
	open(n *Notifier, channel string) (listen, attemptNow bool)
	// enlist readies w, the waiter of hd joining its channel, under n.mu.
	enlist(n *Notifier, w *Waiter, hd *Handle, k Kind)
	// token returns the token of the next attempt, cur being the last one
	// ("" before the first attempt when first is true).
	token(k Kind, cur string, first bool) (string, error)
	// shares reports that the attempts of one Acquire share a token, so the
	// engine carries an attempt of unknown outcome over to the next (one
	// whose reply was lost is confirmed by the next) and undoes what a
	// failed Acquire may have left; otherwise each attempt undoes itself.
	shares() bool
	// undoOnExit reports whether a failed Acquire undoes its token: one of
	// its attempts may have set it (unknown), or one went out (tried).
	undoOnExit(unknown, tried bool) bool
	// undoCut reports whether a call cut short by its caller's deadline is
	// undone once it returns, having found a.
	undoCut(a Attempt, panicked error) bool
}

// The engine's strategies.
var (
	// Contend: attempts race; an Acquire queues behind the waiters of this
	// process already listening on its key instead of racing the one a
	// release is about to wake. Attempts share a token.
	Contend Strategy = contend{}
	// HandOff is Contend whose waiters a release in this process may hand
	// its hold straight to (Notifier.Claim): the mutex and the permit.
	HandOff Strategy = handOff{}
	// Eager makes the first attempt at once, even behind waiters of this
	// process, listening from the start (Once: a stored result is one
	// round trip away, whoever waits).
	Eager Strategy = eager{}
	// FIFO is a kind that keeps its waiters' order in Redis (a fair lock):
	// an Acquire listens, on the key and on its Client's inbox, before its
	// first attempt, which joins that queue at once; one that gives up
	// always undoes its token, taking it out of the queue, and Close waits
	// for that.
	FIFO Strategy = fifo{}
	// Fresh gives every attempt a token of its own and leaves the undo of
	// a failed attempt to the attempt itself (redlock, the multi-lock).
	Fresh Strategy = fresh{}
)

// contend is Contend, and the base of the others.
type contend struct{}

func (contend) enter(*Engine) bool { return true }
func (contend) leave(*Engine)      {}

func (contend) open(n *Notifier, channel string) (listen, attemptNow bool) {
	q := n.queued(channel)
	return q, !q
}

func (contend) enlist(*Notifier, *Waiter, *Handle, Kind) {}

func (contend) token(k Kind, cur string, first bool) (string, error) {
	if first {
		return k.Token()
	}
	return cur, nil
}

func (contend) shares() bool                      { return true }
func (contend) undoOnExit(unknown, _ bool) bool   { return unknown }
func (contend) undoCut(a Attempt, pan error) bool { return a.OK || a.Unknown || pan != nil }

// handOff is HandOff.
type handOff struct{ contend }

func (handOff) enlist(_ *Notifier, w *Waiter, hd *Handle, k Kind) {
	w.hd, w.k, w.claimable = hd, k, true
}

// eager is Eager.
type eager struct{ contend }

func (eager) open(*Notifier, string) (listen, attemptNow bool) { return true, true }

// fifo is FIFO.
type fifo struct{ contend }

// enter makes Close wait for the Acquire, whose way out undoes its token,
// taking it out of the queue: a redis client closed right after Close
// must not leave the entry behind, to be handed the key by the next
// release and hold it for a TTL.
func (fifo) enter(e *Engine) bool { return e.track() }
func (fifo) leave(e *Engine)      { e.bg.Done() }

// open listens before the first attempt, which joins the queue in Redis,
// so no message for it can come in between.
func (fifo) open(*Notifier, string) (listen, attemptNow bool) { return true, true }

// enlist lets a message hand w a hold (give) and undo a gift through hd
// and k; its handoffs come to the Client's inbox on the key, which it
// listens on before its first attempt, as on the key's channel.
func (fifo) enlist(n *Notifier, w *Waiter, hd *Handle, k Kind) {
	w.hd, w.k, w.ttl = hd, k, hd.pol.TTL
	n.subscribeOnce(n.inboxOf(w.cs))
}

func (fifo) undoOnExit(unknown, tried bool) bool { return unknown || tried }

// undoCut: a cut attempt may have joined the queue, whatever it found.
func (fifo) undoCut(Attempt, error) bool { return true }

// fresh is Fresh.
type fresh struct{ contend }

func (fresh) token(k Kind, _ string, first bool) (string, error) {
	if first {
		return "", nil
	}
	return k.Token()
}

func (fresh) shares() bool              { return false }
func (fresh) undoOnExit(_, _ bool) bool { return false }
