package lease

// handOff is HandOff.
type handOff struct{ contend }

func (handOff) enlist(_ *Notifier, w *Waiter, hd *Handle, k Kind) {
	w.hd, w.k, w.claimable = hd, k, true
}
