package lock

import (
	"context"
	"errors"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// TryAcquire makes one attempt. It returns (true, nil) when the lock is now
// held, (false, nil) when someone else holds it, and (false, err) on failure:
// an error wrapping [ErrInvalid], [ErrClosed], the Redis error, or
// [ErrNotAcquired] when the attempt succeeded too late to be trusted (its
// reply came after the lease's safety deadline) or too few replicas
// acknowledged it ([WithReplicaAck]).
//
// It returns by ctx's deadline (give or take a goroutine's scheduling),
// even when Redis does not answer: the error then matches
// context.DeadlineExceeded. When a failed call may have reached Redis,
// what it may have set is removed in the background, once the call has
// returned, by a goroutine [Client.Close] waits for.
func (l *Lock) TryAcquire(ctx context.Context) (bool, error) {
	if err := l.heldLocally(); err != nil {
		return false, err
	}
	done, err := l.claimHandle()
	if err != nil {
		return false, err
	}
	defer done()
	ok, err := l.handle().TryAcquire(ctx, l.tryKind())
	if ok && l.deg.Load() != nil {
		l.deg.Store(nil)
	}
	if err != nil && l.degradable() && unreachable(err) {
		return l.acquireLocal(ctx, time.Time{}, err, nil)
	}
	return ok, err
}

// Acquire waits until the lock is held, ctx is done, or the wait timeout
// ([WithWaitTimeout]) passes, sleeping between attempts with backoff
// ([WithBackoff]) and waking when a holder releases ([WithNotify]).
//
// It returns nil when held; an error wrapping [ErrNotAcquired] when the wait
// ended, also matching context.Cause(ctx) when ctx ended it and the last
// failed attempt's error, if any; a wrapped Redis error when a retry cannot
// mend it (network errors are retried until the wait ends); [ErrClosed]; or
// [ErrInvalid], also for a handle already held. It returns by ctx's deadline
// even when Redis does not answer, and a failed Acquire leaves no hold
// behind. With [WithFallback](FallbackLocal) an unreachable Redis gives an
// in-process hold ([Lock.Degraded]); with [WithMaxWaiters], a call beyond
// the cap fails at once with [ErrContended]. See
// docs/guide.md#the-verbs-in-detail.
func (l *Lock) Acquire(ctx context.Context) error {
	if err := l.heldLocally(); err != nil {
		return err
	}
	done, err := l.claimHandle()
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	carry := l.carryWaiter()
	defer carry.end()
	err = l.handle().Acquire(ctx, l.kind())
	if err == nil {
		l.deg.Store(nil)
		return nil
	}
	if l.degradable() && unreachable(err) {
		_, err = l.acquireLocal(ctx, start, err, carry)
	}
	return err
}

// Try sends one acquire.
func (k *kind) Try(ctx context.Context, token string) lease.Attempt {
	start := time.Now()
	var (
		r   acquireResult
		err error
	)
	if k.cfg.acks > 0 {
		r, err = (*Lock)(k).acquireAcked(ctx, token)
	} else {
		r, err = k.cfg.acquire(ctx, &k.hd.Keys, token)
	}
	err = mixedKind(k.hd.Keys.User, err, "mutex") // a semaphore's backend maps its own
	if err != nil && errors.As(err, new(undoneError)) {
		return lease.Attempt{Err: err, Spent: true, Final: !retryable(err)}
	}
	if err != nil {
		return lease.Attempt{Err: err, Unknown: sent(err), Final: (*Lock)(k).final(err)}
	}
	return lease.Attempt{OK: r.ok, Fence: r.fence, Sent: start, PTTL: r.pttl}
}

// Undo removes what an attempt with token may have set. It releases
// token's hold only: a re-entrant token names one hold, so the owner's
// others stay. If the undo's own reply is lost, the hold expires by its TTL.
func (k *kind) Undo(ctx context.Context, token string) {
	_, _ = k.cfg.release(ctx, &k.hd.Keys, token, 0)
}

// undoneError is the error of an attempt that took the lock and sent the
// release of its token itself (too few replica acknowledgements): the
// token is spent, and the Acquire goes on with a fresh one.
type undoneError struct{ error }

func (e undoneError) Unwrap() error { return e.error }
