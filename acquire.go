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
// ([WithWaitTimeout]) passes. Between attempts it sleeps with jittered
// exponential backoff ([WithBackoff]), never past the holder's remaining TTL,
// and wakes at once when a holder releases ([WithNotify]). The attempts of
// one Acquire carry the same token, so an attempt whose reply was lost but
// which took the lock is confirmed by the next. Once Acquire has sent a
// release of its token to undo a success it cannot trust (confirmed after
// the lease's safety deadline, a hold a release handed over too late, or
// too few replica acknowledgements with [WithReplicaAck]), the attempts
// that follow carry a fresh token (for a re-entrant lock, a fresh hold id
// of the same owner): that release may land late, after a later attempt
// took the key, and must then find nothing of that attempt's to delete.
//
// It returns nil when held; an error wrapping [ErrNotAcquired] when the wait
// ended, also matching context.Cause(ctx) when ctx ended it and the last
// failed attempt's error, if any; a wrapped Redis error when Redis fails in
// a way a retry cannot mend (network errors are retried until the wait
// ends); or [ErrInvalid] or [ErrClosed]. It returns by ctx's deadline and
// by the wait timeout, give or take a goroutine's scheduling, even when
// Redis does not answer. Each failed attempt is reported to the Observer
// ([EventAttemptFailed]) and logged ([WithLogger]): at debug level, and as
// a warning at the third failure in a row and every tenth after. A failed
// Acquire leaves no hold behind: what an attempt of unknown outcome may have
// set is removed in the background, as for TryAcquire. Acquire on a handle
// that is held returns ErrInvalid.
//
// With [WithFallback](FallbackLocal), an attempt that finds Redis
// unreachable ends the Redis part at once and the call takes an in-process
// lock instead ([Lock.Degraded]); with [WithMaxWaiters], a call beyond the
// cap fails at once with [ErrContended].
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
