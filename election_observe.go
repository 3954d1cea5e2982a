package lock

import (
	"context"
	"errors"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// Observe returns a channel that gives the election's state now, then
// each change of it: a new leader, a new value ([Election.Proclaim]), and
// nobody leading as the zero [Leadership] (Term 0), in term order. It is
// closed when ctx ends or the Client closes, and at once for an invalid
// Election. It needs no campaign.
//
// Every change publishes on the election's channel, which the Client's
// wake-up subscription hears; the observer then reads the state. A term
// that ends silently (a crashed leader) is read at its expiry, and while
// the subscription is down the state is read every backoff. The channel
// holds one state and the latest wins: a slow reader skips states, blocks
// nobody, and ends at the current one. Each Observe runs one goroutine of
// the Client until ctx ends. See docs/design/election.md.
func (e *Election) Observe(ctx context.Context) <-chan Leadership {
	out := make(chan Leadership, 1)
	if e.usable() != nil {
		close(out)
		return out
	}
	eng := &e.set.c.eng
	w := eng.Notifier.Watch(e.l.hd.Keys.Notify())
	if w == nil || !eng.Go(func() { e.observe(ctx, w, out) }) {
		w.Stop()
		close(out)
	}
	return out
}

// observe reads the state after each wake-up of w, and at the expiry of
// the leader's term, and offers each change to out, until ctx ends or
// the Client closes.
func (e *Election) observe(ctx context.Context, w *lease.Watch, out chan Leadership) {
	defer close(out)
	defer w.Stop()
	done := e.set.c.eng.Context().Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var last Leadership
	first := true
	for {
		l, left, err := e.read(ctx)
		if err == nil && (first || !sameState(l, last)) && (l.Term == 0 || l.Term >= last.Term) {
			offer(out, l)
			last, first = l, false
		}
		t.Reset(e.observeWait(w, l, left, err))
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-w.C():
		case <-t.C:
		}
	}
}

// read reads the election's state for an observer: nobody leading is the
// zero Leadership, with no error.
func (e *Election) read(ctx context.Context) (Leadership, time.Duration, error) {
	// Filled by the call, and read only once it returned: a call cut
	// short by ctx goes on in the background.
	var r struct {
		l    Leadership
		left time.Duration
	}
	err := e.set.c.callBounded(ctx, func() (err error) {
		r.l, r.left, err = readLeader(ctx, e.set.c.rdb, &e.l.hd.Keys)
		return err
	})
	switch {
	case errors.Is(err, ErrNoLeader):
		return Leadership{}, 0, nil
	case err != nil:
		return Leadership{}, 0, err
	}
	return r.l, r.left, nil
}

// observeWait is how long an observer sleeps without a wake-up: until the
// leader's term runs out (a crashed leader publishes nothing); a backoff
// while the subscription is down or the read failed; else until woken.
func (e *Election) observeWait(w *lease.Watch, l Leadership, left time.Duration, err error) time.Duration {
	d := 24 * time.Hour
	if err != nil || !w.Listening() {
		d = e.set.backoffMax
	}
	if l.Term != 0 && left >= 0 {
		d = min(d, left+time.Millisecond)
	}
	return d
}

// offer puts l into out, buffered one deep, replacing a state the reader
// has not taken yet: the latest state wins.
func offer(out chan Leadership, l Leadership) {
	for {
		select {
		case out <- l:
			return
		default:
		}
		select {
		case <-out:
		default:
		}
	}
}

// sameState reports whether a and b are the same state.
func sameState(a, b Leadership) bool {
	return a.Term == b.Term && a.Value == b.Value && a.Since.Equal(b.Since)
}
