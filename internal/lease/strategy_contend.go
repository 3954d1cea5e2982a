package lease

// contend is Contend, and the base of the others.
type contend struct{}

func (contend) enter(*Engine) bool { return true }
func (contend) leave(*Engine)      {}

// open queues behind the waiters of this process already listening on
// channel, without an attempt, instead of racing the one a release is
// about to wake.
func (contend) open(n *Notifier, channel string) (listen, attemptNow bool) {
	q := n.queued(channel)
	return q, !q
}

func (contend) enlist(*Notifier, *Waiter, *Handle, Kind) {}

// token makes the Acquire's one token, which its attempts share.
func (contend) token(k Kind, cur string, first bool) (string, error) {
	if first {
		return k.Token()
	}
	return cur, nil
}

func (contend) shares() bool { return true }

// undoOnExit: only a token an attempt of unknown outcome may have set.
func (contend) undoOnExit(unknown, _ bool) bool { return unknown }

// undoCut: only a cut call that took the lock, may have, or panicked.
func (contend) undoCut(a Attempt, pan error) bool { return a.OK || a.Unknown || pan != nil }
