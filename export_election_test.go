package lock

// ElectionListening reports whether e's Client hears the election's
// channel, so a message published from now on reaches its waiters and
// observers (for tests).
func ElectionListening(e *Election) bool {
	return e.set.c.eng.Notifier.Listening(e.l.hd.Keys.Notify())
}
