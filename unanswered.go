package lock

import "context"

// unansweredError is the error of a call that left a shared pipeline at
// the end of its ctx, before the reply: it may take effect in Redis until
// settled closes, and an undo must wait for that (see scriptBackend).
type unansweredError struct {
	cause   error
	settled <-chan struct{}
}

func (e unansweredError) Error() string {
	return "lock: call sent, outcome unknown (no reply before ctx ended): " + e.cause.Error()
}

func (e unansweredError) Unwrap() error { return e.cause }

// leftUnanswered records that an acquire with token left its pipeline
// before the reply, until settled closes.
func (b *scriptBackend) leftUnanswered(token string, settled <-chan struct{}) {
	b.mu.Lock()
	if b.unanswered == nil {
		b.unanswered = map[string]<-chan struct{}{}
	}
	b.unanswered[token] = settled
	b.n.Add(1)
	b.mu.Unlock()
	go func() {
		<-settled
		b.mu.Lock()
		if b.unanswered[token] == settled {
			delete(b.unanswered, token)
			b.n.Add(-1)
		}
		b.mu.Unlock()
	}()
}

// awaitAcquire waits until no pipeline carrying an acquire with token is
// out, or ctx ends (then the release must not be sent: it would land
// before the acquire it undoes).
func (b *scriptBackend) awaitAcquire(ctx context.Context, token string) error {
	if b.n.Load() == 0 {
		return nil
	}
	b.mu.Lock()
	settled := b.unanswered[token]
	b.mu.Unlock()
	if settled == nil {
		return nil
	}
	select {
	case <-settled:
		return nil
	case <-ctx.Done():
		return unsentError{context.Cause(ctx)}
	}
}
