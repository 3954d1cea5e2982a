package lock

// Observer is told what the locks of a [Client] do, for metrics and
// tracing. Observe is called synchronously, on the goroutine that saw the
// event: the caller's for acquire, failed attempts, release, extend and WithLock (and
// for a loss that Release, Extend or TTL discovers), the Client's
// goroutines for renewals, renewal failures and losses (also a loss found when a
// call its caller stopped waiting for returns), a timer's for a loss after
// Close. It must be
// safe for concurrent use, return quickly, and not call [Client.Close]
// (Close waits for the goroutines that call it).
//
// New kinds of events may be added; an Observer should ignore kinds it does
// not know.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to [Observer]. A nil ObserverFunc
// observes nothing.
type ObserverFunc func(Event)

// Observe calls f(e), unless f is nil.
func (f ObserverFunc) Observe(e Event) {
	if f != nil {
		f(e)
	}
}

// Observers returns an [Observer] that passes each event to every one of
// os, in the order given, on the goroutine that saw the event. nil entries
// are ignored; with no non-nil entry it returns nil (no observer, at no
// cost), and with one it returns that one. Use it to give [WithObserver]
// several observers, such as metrics and tracing.
func Observers(os ...Observer) Observer {
	var list []Observer
	for _, o := range os {
		if o != nil {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return &fanOut{list: list}
}

// fanOut is the Observer of [Observers]. A pointer, so a config holding it
// stays comparable.
type fanOut struct{ list []Observer }

// Observe passes e to each observer in turn.
func (f *fanOut) Observe(e Event) {
	for _, o := range f.list {
		o.Observe(e)
	}
}
