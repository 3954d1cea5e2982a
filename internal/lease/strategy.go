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
