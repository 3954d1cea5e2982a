package lock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// Reservation is units taken from a [Limiter] by [Limiter.Reserve],
// [ReserveAll] or [WaitAll]: they are the caller's from the time they are
// due, and may be given back, in part or whole, by [Reservation.Settle] or
// [Reservation.Cancel]. It is safe for concurrent use.
type Reservation struct {
	l     *Limiter
	id    string
	n     int64
	delay time.Duration
	// due is when the units are due, server microseconds, as last heard:
	// from the reservation, then from each look of WaitAll. Tests read it.
	due int64

	mu      sync.Mutex
	settled bool
}

// Delay returns how long after the reservation its units are due, as
// Redis answered then: 0 when they were due at once. Units given back
// by others may make them due sooner; [WaitAll] hears of that, a caller
// sleeping Delay itself does not.
func (r *Reservation) Delay() time.Duration {
	if r == nil {
		return 0
	}
	return r.delay
}

// N returns the units reserved; 0 for a nil Reservation.
func (r *Reservation) N() int64 {
	if r == nil {
		return 0
	}
	return r.n
}

// Settle tells the limiter how many units the reservation used: fewer
// than N gives the rest back, more takes the difference (a debt later
// callers wait for). Only the units still ahead of now on the limiter's
// schedule go back: units whose time has passed were spent. Reservations
// queued behind this one become due sooner by what comes back, and
// waiters hear it. The first Settle or Cancel that succeeds counts; later
// ones change nothing and return nil. actual < 0 or a nil Reservation is
// [ErrInvalid].
func (r *Reservation) Settle(ctx context.Context, actual int64) error {
	if r == nil || r.l == nil {
		return lease.NewOpError("lock", "settle", "", invalidf("nil Reservation"))
	}
	if actual < 0 {
		return lease.NewOpError("lock", "settle", r.l.key, invalidf("%d units used: must be at least 0", actual))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled {
		return nil
	}
	l := r.l
	keys := []string{l.keys.Lock(), l.keys.Companion("res"), l.keys.Companion("done"), l.keys.Notify()}
	err := l.c.callBounded(ctx, func() error {
		// A resend counts once: the script remembers the id (P{K}:done).
		s, _ := l.c.pub.script(ctx, luascripts.LimiterSettle, luascripts.LimiterSettleSrc)
		return s.Run(ctx, l.c.rdb, keys, l.rate.Per.Microseconds(), l.rate.N,
			limiterIdle.Milliseconds(), r.id, r.n, actual, settledKeep.Milliseconds()).Err()
	})
	if err != nil {
		return lease.NewOpError("lock", "settle", l.key, mixedKind(l.key, err, "rate limiter"))
	}
	r.settled = true
	return nil
}

// Cancel gives back the reservation's units that are still ahead of now
// on the limiter's schedule: Settle(ctx, 0).
func (r *Reservation) Cancel(ctx context.Context) error { return r.Settle(ctx, 0) }

// cancelTimeout bounds the Cancel of a Wait that gave up.
const cancelTimeout = 5 * time.Second

// cancelAll gives back the units of rs, whose wait ended, on a context of
// its own (ctx may be why it ended), and returns the errors of those it
// could not: their units come back at their time.
func cancelAll(ctx context.Context, rs []*Reservation) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer cancel()
	var errs []error
	for _, r := range rs {
		errs = append(errs, r.Cancel(cctx))
	}
	return errors.Join(errs...)
}

// waitDue waits until the reservations rs (from one ReserveAll) are due,
// on a timer, looking again when a settle on one of their limiters moves
// the queue. It returns an error matching ErrNotAcquired when ctx ends
// first, or when they would be due after its deadline or a wait timeout.
func waitDue(ctx context.Context, rs []*Reservation) error {
	wait := rs[0].delay
	if wait <= 0 {
		return nil
	}
	if err := waitAllowed(ctx, rs, wait); err != nil {
		return err
	}
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}, {}}
	var lns []*lease.Listener
	for _, r := range rs {
		if r.l.cfg.notify {
			ln := r.l.c.eng.Notifier.Listen(r.l.keys.Notify())
			defer ln.Leave()
			lns = append(lns, ln)
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ln.Wake())})
		}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	cases[1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)}
	for {
		i, _, _ := reflect.Select(cases)
		switch i {
		case 0:
			return errors.Join(ErrNotAcquired, context.Cause(ctx))
		case 1:
			return nil
		}
		// A settle moved the queue, or the subscription was confirmed: the
		// units may be due sooner than the timer says, never later.
		lns[i-2].Looked()
		left, now, err := when(ctx, rs)
		if err != nil {
			continue // the timer stands: the units are due by then anyway
		}
		for _, r := range rs {
			r.due = now + max(left, 0).Microseconds()
		}
		if left <= 0 {
			return nil
		}
		t.Reset(left)
	}
}

// waitAllowed returns the error of a wait of d for rs that ctx's deadline
// or a limiter's wait timeout would end first.
func waitAllowed(ctx context.Context, rs []*Reservation, d time.Duration) error {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return errors.Join(ErrNotAcquired, fmt.Errorf("lock: units due in %v, after the context's deadline: %w",
			d, context.DeadlineExceeded))
	}
	for _, r := range rs {
		if w := r.l.cfg.wait; w > 0 && w < d {
			return errors.Join(ErrNotAcquired, fmt.Errorf("lock: units due in %v, beyond the wait timeout %v", d, w))
		}
	}
	return nil
}

// when asks how long until every reservation of rs is due, and the
// server's clock (us).
func when(ctx context.Context, rs []*Reservation) (time.Duration, int64, error) {
	c := rs[0].l.c
	keys := make([]string, 0, 2*len(rs))
	args := make([]any, 0, 4*len(rs))
	for _, r := range rs {
		keys = append(keys, r.l.keys.Lock(), r.l.keys.Companion("res"))
		args = r.l.rate.args(args)
	}
	for _, r := range rs {
		args = append(args, r.id)
	}
	var v []int64
	err := c.callBounded(ctx, func() (err error) {
		v, err = luascripts.LimiterWhen.Run(ctx, c.rdb, keys, args...).Int64Slice()
		return err
	})
	if err == nil && len(v) != 2 {
		err = errors.New("limiter script: unexpected reply")
	}
	if err != nil {
		return 0, 0, err
	}
	return time.Duration(v[0]) * time.Microsecond, v[1], nil
}
