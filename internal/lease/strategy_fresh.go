package lease

// fresh is Fresh.
type fresh struct{ contend }

// token makes a token for each attempt; none before the first.
func (fresh) token(k Kind, _ string, first bool) (string, error) {
	if first {
		return "", nil
	}
	return k.Token()
}

func (fresh) shares() bool              { return false }
func (fresh) undoOnExit(_, _ bool) bool { return false }
