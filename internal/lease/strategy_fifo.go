package lease

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
