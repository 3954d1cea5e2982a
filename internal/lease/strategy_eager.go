package lease

// eager is Eager.
type eager struct{ contend }

func (eager) open(*Notifier, string) (listen, attemptNow bool) { return true, true }
