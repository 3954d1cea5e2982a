package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentlock/lock/internal/lockutil"
)

// attempt sends one acquire and installs the hold on success.
func (l *Lock) attempt(ctx context.Context, token string) (acquireResult, error) {
	sent := time.Now()
	var (
		r   acquireResult
		err error
	)
	if l.cfg.acks > 0 {
		r, err = l.acquireAcked(ctx, token)
	} else {
		r, err = l.be.acquire(ctx, &l.k, token, l.cfg.ttl)
	}
	if err != nil || !r.ok {
		return r, err
	}
	if err := l.install(token, r.fence, sent); err != nil {
		return acquireResult{}, err
	}
	return r, nil
}

// install makes token's hold, confirmed by a call sent at sent, the
// handle's current hold and puts it into renewal.
func (l *Lock) install(token string, fence int64, sent time.Time) error {
	h := newHold(l, token, fence, sent)
	if h.pastDeadline(time.Now()) {
		// The reply came so late that the lease may already have run out in
		// Redis: someone else may hold the lock. Undo and report a failed
		// attempt rather than return a hold we cannot trust.
		l.cleanup(token)
		return errLateReply
	}
	l.mu.Lock()
	l.h = h
	l.mu.Unlock()
	l.c.renewal.add(h)
	return nil
}

// cleanup removes what an attempt of unknown outcome may have set, so a
// failed acquisition leaves nothing behind. It releases token's hold only:
// a re-entrant token names one hold, so the owner's others stay. If the
// cleanup's own reply is lost, the hold expires by its TTL.
func (l *Lock) cleanup(token string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout(l.cfg.ttl))
	defer cancel()
	_, _ = l.be.release(ctx, &l.k, token)
}

// cleanupTimeout bounds the calls the library makes on the caller's behalf
// once the caller's own context may be gone: a release after WithLock, the
// undo of a failed acquisition.
func cleanupTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl, time.Second), 5*time.Second)
}

// TryAcquire makes one attempt. It returns (true, nil) when the lock is now
// held, (false, nil) when someone else holds it, and (false, err) on failure:
// an error wrapping [ErrInvalid], [ErrClosed], the Redis error, or
// [ErrNotAcquired] when the attempt succeeded too late to be trusted (its
// reply came after the lease's safety deadline) or too few replicas
// acknowledged it ([WithReplicaAck]). When a
// failed call may have reached Redis, TryAcquire removes what it may have
// set before returning.
func (l *Lock) TryAcquire(ctx context.Context) (bool, error) {
	if err := l.begin(); err != nil {
		return false, err
	}
	defer l.done()
	token, err := l.newToken()
	if err != nil {
		return false, err
	}
	start := time.Now()
	l.observe(Event{Kind: EventAcquireStart})
	r, err := l.attempt(ctx, token)
	switch {
	case err != nil:
		if sent(err) {
			l.cleanup(token)
		}
		err = fmt.Errorf("lock: acquire %q: %w", l.k.User, err)
		l.observe(Event{Kind: EventAcquire, Token: token, Duration: time.Since(start), Attempts: 1, Err: err})
		return false, err
	case !r.ok:
		l.observe(Event{Kind: EventAcquire, Token: token, Duration: time.Since(start), Attempts: 1, Err: ErrNotAcquired})
		return false, nil
	}
	l.observe(Event{Kind: EventAcquire, Token: token, Fence: r.fence, Duration: time.Since(start), Attempts: 1})
	return true, nil
}

var errWaitTimeout = errors.New("lock: wait timeout")

// errLateReply fails an attempt whose success was confirmed only after the
// hold's safety deadline. It wraps ErrNotAcquired; Acquire retries it.
var errLateReply = fmt.Errorf("%w: reply arrived after the lease's safety deadline", ErrNotAcquired)

// Acquire waits until the lock is held, ctx is done, or the wait timeout
// ([WithWaitTimeout]) passes. Between attempts it sleeps with jittered
// exponential backoff ([WithBackoff]), never past the holder's remaining TTL,
// and wakes at once when a holder releases ([WithNotify]). Every attempt of
// one Acquire carries the same token, so an attempt whose reply was lost but
// which took the lock is confirmed by the next.
//
// It returns nil when held; an error wrapping [ErrNotAcquired] when the wait
// ended, also matching context.Cause(ctx) when ctx ended it; a wrapped Redis
// error when Redis fails in a way a retry cannot mend (network errors are
// retried until the wait ends); or [ErrInvalid] or [ErrClosed]. A failed
// Acquire leaves no hold behind. Acquire on a handle that is held returns
// ErrInvalid.
func (l *Lock) Acquire(ctx context.Context) error {
	if err := l.begin(); err != nil {
		return err
	}
	defer l.done()
	token, err := l.newToken()
	if err != nil {
		return err
	}
	start := time.Now()
	l.observe(Event{Kind: EventAcquireStart})
	attempts, fence, err := l.wait(ctx, token)
	if err != nil {
		l.observe(Event{Kind: EventAcquire, Token: token, Duration: time.Since(start), Attempts: attempts, Err: err})
		return err
	}
	l.observe(Event{Kind: EventAcquire, Token: token, Fence: fence, Duration: time.Since(start), Attempts: attempts})
	return nil
}

// wait is Acquire's loop; it returns the attempts made and the fence.
func (l *Lock) wait(ctx context.Context, token string) (attempts int, fence int64, err error) {
	wctx := ctx
	if l.cfg.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, l.cfg.wait, errWaitTimeout)
		defer cancel()
	}
	var w *waiter
	defer func() { w.leave() }()
	if l.cfg.notify && l.c.notifier.queued(l.k.Notify()) {
		// Others in this process already wait for this key: queue behind
		// them instead of racing the one a release is about to wake.
		w, _ = l.c.notifier.join(l.k.Notify(), l, token)
	}

	var (
		unknown bool  // an attempt failed after it may have reached Redis
		lastErr error // the last retryable error
		timer   *time.Timer
	)
	for n := 0; ; n++ {
		if l.c.closed.Load() {
			err = fmt.Errorf("lock: acquire %q: %w", l.k.User, ErrClosed)
			break
		}
		if g, ok := w.takeGift(); ok && !g.retry {
			// A release in this process handed us the lock.
			err := l.install(token, g.fence, g.sent)
			if err == nil {
				return attempts, g.fence, nil
			}
			w.endAttempt() // install undid it: claimable again
			unknown, lastErr = true, err
		}
		var pttl time.Duration
		if (n > 0 || w == nil) && w.beginAttempt() {
			attempts++
			r, aerr := l.attempt(wctx, token)
			if aerr != nil || !r.ok {
				w.endAttempt()
			}
			switch {
			case aerr == nil && r.ok:
				return attempts, r.fence, nil
			case aerr == nil:
				pttl = r.pttl
			case wctx.Err() != nil:
				unknown = unknown || sent(aerr)
			case !retryable(aerr):
				l.cleanup(token)
				return attempts, 0, fmt.Errorf("lock: acquire %q: %w", l.k.User, aerr)
			default:
				unknown, lastErr = true, aerr
			}
		}
		if wctx.Err() != nil {
			break
		}
		if w == nil && l.cfg.notify {
			var ready bool
			w, ready = l.c.notifier.join(l.k.Notify(), l, token)
			if ready && pttl > 0 {
				// We joined after our failed attempt: a release in between
				// would be missed, so look once more now that we listen.
				continue
			}
		}
		d := l.backoff(n)
		if pttl > 0 && pttl < d {
			d = pttl
		}
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-w.wake():
		case <-timer.C:
		case <-wctx.Done():
		case <-l.c.ctx.Done():
		}
		if wctx.Err() != nil {
			break
		}
	}
	if unknown {
		l.cleanup(token)
	}
	if err != nil {
		return attempts, 0, err
	}
	cause := context.Cause(wctx)
	if errors.Is(cause, errWaitTimeout) && ctx.Err() == nil {
		if lastErr != nil {
			return attempts, 0, fmt.Errorf("lock: acquire %q: %w after %v: %w", l.k.User, ErrNotAcquired, l.cfg.wait, lastErr)
		}
		return attempts, 0, fmt.Errorf("lock: acquire %q: %w after %v", l.k.User, ErrNotAcquired, l.cfg.wait)
	}
	// Match both ctx.Err() and, when the canceller gave one, its cause.
	ended := ctx.Err()
	if cause = context.Cause(ctx); cause != nil && cause != ended {
		ended = fmt.Errorf("%w (%w)", ended, cause)
	}
	if lastErr != nil {
		return attempts, 0, fmt.Errorf("lock: acquire %q: %w: %w (last error: %w)", l.k.User, ErrNotAcquired, ended, lastErr)
	}
	return attempts, 0, fmt.Errorf("lock: acquire %q: %w: %w", l.k.User, ErrNotAcquired, ended)
}

// backoff returns the n-th sleep: uniform in [min, min(max, min·2^n)].
func (l *Lock) backoff(n int) time.Duration {
	return lockutil.Backoff(l.cfg.backoffMin, l.cfg.backoffMax, n)
}

func (l *Lock) observe(e Event) {
	if o := l.cfg.observer; o != nil {
		e.Key = l.k.User
		e.Token = l.publicToken(e.Token)
		o.Observe(e)
	}
}
