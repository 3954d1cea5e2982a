package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lockutil"
)

// Client creates locks over one Redis deployment and owns their background
// work: one renewal loop for every held lock and one pub/sub subscription
// for every waiter, each started on first need. Create one per process and
// share it; it is safe for concurrent use.
type Client struct {
	rdb     redis.UniversalClient
	cfg     config
	err     error // configuration error, returned by every lock
	cluster bool

	closed atomic.Bool
	ctx    context.Context // ends at Close, stopping background work
	cancel context.CancelFunc
	wg     sync.WaitGroup

	renewal  renewal
	notifier notifier

	beMu     sync.Mutex
	backends map[backendKind]backend
}

// NewClient returns a Client over rdb (a *redis.Client, *redis.ClusterClient,
// failover client or any other redis.UniversalClient). opts are the defaults
// of every lock it makes. A nil rdb or an invalid option is reported, wrapping
// [ErrInvalid], by every later call; NewClient itself never fails. It starts
// no goroutine; see [Client.Close].
func NewClient(rdb redis.UniversalClient, opts ...Option) *Client {
	c := &Client{rdb: rdb, cfg: defaultConfig().with(opts), backends: map[backendKind]backend{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.renewal.init(c)
	c.notifier.init(c)
	c.err = c.cfg.validate()
	switch v := rdb.(type) {
	case nil:
		c.err = invalidf("nil redis client")
	case *redis.Client:
		if v == nil {
			c.err = invalidf("nil redis client")
		}
	case *redis.ClusterClient:
		c.cluster = true
		if v == nil {
			c.err = invalidf("nil redis client")
		}
	case *redis.Ring:
		if v == nil {
			c.err = invalidf("nil redis client")
		}
	}
	return c
}

// Close stops the renewal loop and the wake-up subscription and waits for
// them to return: if a renewal call is out to a server that does not answer,
// that wait lasts until go-redis gives the call up (its read and dial
// timeouts). It is idempotent and always returns nil. Locks still held
// are no longer renewed: their Lost channels close at their safety
// deadlines. Afterwards Acquire, TryAcquire, Extend and WithLock return
// [ErrClosed]; Release still deletes a hold, so shutdown order strands
// nothing. Close does not close the redis client.
func (c *Client) Close() error {
	if c.cancel == nil {
		return nil // a zero Client: nothing was started
	}
	if c.closed.Swap(true) {
		return nil
	}
	c.renewal.mu.Lock() // orders every renewal.add before the wait below
	c.renewal.mu.Unlock()
	c.cancel()
	c.notifier.close()
	c.wg.Wait()
	c.renewal.abandon()
	return nil
}

// backendKind picks one of the few shared backends.
type backendKind struct {
	mode      ReleaseMode
	reentrant bool
	fencing   bool
}

func (c *Client) backend(k backendKind) backend {
	c.beMu.Lock()
	defer c.beMu.Unlock()
	if b, ok := c.backends[k]; ok {
		return b
	}
	var b backend
	if k.mode == ReleaseWatch {
		b = &watchBackend{rdb: c.rdb, fencing: k.fencing}
	} else {
		b = &scriptBackend{rdb: c.rdb, reentrant: k.reentrant, fencing: k.fencing}
	}
	c.backends[k] = b
	return b
}

// Lock is a handle on one distributed lock. It is not held until Acquire or
// TryAcquire succeeds; after Release it may be acquired again, each hold
// getting a fresh token and fence. Its methods are safe for concurrent use,
// but one handle holds the lock at most once at a time: use one handle per
// holder.
type Lock struct {
	c   *Client
	k   keys
	cfg *config // the Client's own when NewLock had no options
	err error   // configuration error, returned by every verb
	be  backend

	mu   sync.Mutex
	busy bool  // an Acquire or TryAcquire is under way
	h    *hold // the current or last hold; nil before the first
}

// NewLock returns a handle on the lock named key, configured by the Client's
// options and then opts. Any bytes make a key; distinct keys never exclude
// each other. An empty key or an invalid option is reported, wrapping
// [ErrInvalid], by every verb of the handle. NewLock talks to no server and
// starts nothing.
func (c *Client) NewLock(key string, opts ...Option) *Lock {
	l := &Lock{c: c, cfg: &c.cfg}
	if len(opts) > 0 {
		cfg := c.cfg.with(opts)
		l.cfg = &cfg
	}
	l.k = makeKeys(l.cfg.prefix, key)
	l.err = c.err
	if l.err == nil && len(opts) > 0 {
		l.err = l.cfg.validate()
	}
	if l.err == nil && key == "" {
		l.err = invalidf("empty key")
	}
	if l.err == nil && l.cfg.acks > 0 && !canWait(c.rdb) {
		l.err = invalidf("replica acks need a *redis.Client or *redis.ClusterClient, not %T", c.rdb)
	}
	if l.err == nil && c.cluster && strings.HasPrefix(key, "}") {
		// P{}...} has an empty hash tag: its keys would spread over slots.
		l.err = invalidf("key %q: on Redis Cluster a key must not start with '}'", key)
	}
	if l.err != nil {
		l.err = fmt.Errorf("lock: key %q: %w", key, l.err)
		return l
	}
	l.be = c.backend(backendKind{mode: l.cfg.mode, reentrant: l.cfg.ownerSet, fencing: l.cfg.fencing})
	return l
}

// Key returns the caller's key, as given to NewLock.
func (l *Lock) Key() string { return l.k.user }

// Token returns the token of the current or last hold: a random UUID v4, or
// the owner id for a re-entrant lock ([WithOwner]). "" before the first
// acquisition.
func (l *Lock) Token() string {
	if h := l.hold(); h != nil {
		return h.token
	}
	return ""
}

// Fence returns the fencing token of the current or last hold: a number that
// strictly increases with each acquisition of the key, to be passed to a
// downstream store that rejects writes carrying an older fence than it has
// seen. 0 before the first acquisition, or with [WithFencing](false).
func (l *Lock) Fence() int64 {
	if h := l.hold(); h != nil {
		return h.fence
	}
	return 0
}

// Lost returns a channel closed when the current hold ends involuntarily:
// taken by someone else, expired, deleted, or not confirmed by renewal
// before its safety deadline. A Release does not close it. Each hold has its
// own channel; before the first acquisition Lost returns nil (a channel that
// never closes). See [Lock.LostErr] for the reason.
func (l *Lock) Lost() <-chan struct{} {
	if h := l.hold(); h != nil {
		return h.lostChan()
	}
	return nil
}

// LostErr returns the [*LostError] of the current hold once [Lock.Lost] has
// closed, and nil before. It matches [ErrLockLost].
func (l *Lock) LostErr() error {
	if h := l.hold(); h != nil {
		return h.lostErr()
	}
	return nil
}

func (l *Lock) hold() *hold {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h
}

// newToken returns a random UUID v4 from crypto/rand, or the owner id.
func (l *Lock) newToken() (string, error) {
	if l.cfg.ownerSet {
		return l.cfg.owner, nil
	}
	// A version 4 UUID filled straight from crypto/rand: uuid.NewRandom reads
	// through an io.Reader and costs one more allocation per acquisition.
	var u uuid.UUID
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("lock: acquire %q: token: %w", l.k.user, err)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String(), nil
}

// usable returns the handle's configuration error, if any.
func (l *Lock) usable() error {
	if l.c == nil {
		return invalidf("zero Lock: make locks with Client.NewLock")
	}
	return l.err
}

// begin checks that an acquisition may start and marks the handle busy.
func (l *Lock) begin() error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.c.closed.Load() {
		return fmt.Errorf("lock: acquire %q: %w", l.k.user, ErrClosed)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy {
		return fmt.Errorf("lock: acquire %q: %w: another acquisition on this handle is under way", l.k.user, ErrInvalid)
	}
	if l.h != nil && l.h.active() {
		return fmt.Errorf("lock: acquire %q: %w: already held by this handle; release it first", l.k.user, ErrInvalid)
	}
	l.busy = true
	return nil
}

func (l *Lock) done() {
	l.mu.Lock()
	l.busy = false
	l.mu.Unlock()
}

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
	if !time.Now().Before(h.deadline) {
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
// failed acquisition leaves nothing behind. A re-entrant hold is left to its
// TTL: releasing a level we may not have taken could free the owner's outer
// hold.
func (l *Lock) cleanup(token string) {
	if l.cfg.ownerSet {
		return
	}
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
		l.cleanup(token)
		err = fmt.Errorf("lock: acquire %q: %w", l.k.user, err)
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
	if l.cfg.notify && l.c.notifier.queued(l.k.notify) {
		// Others in this process already wait for this key: queue behind
		// them instead of racing the one a release is about to wake.
		w, _ = l.c.notifier.join(l.k.notify, l, token)
	}

	var (
		unknown bool  // an attempt failed after it may have reached Redis
		lastErr error // the last retryable error
		timer   *time.Timer
	)
	for n := 0; ; n++ {
		if l.c.closed.Load() {
			err = fmt.Errorf("lock: acquire %q: %w", l.k.user, ErrClosed)
			break
		}
		if g, ok := w.takeGift(); ok && !g.retry {
			// A release in this process handed us the lock.
			err := l.install(token, g.fence, g.sent)
			if err == nil {
				return attempts, g.fence, nil
			}
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
				unknown = true
			case !retryable(aerr):
				l.cleanup(token)
				return attempts, 0, fmt.Errorf("lock: acquire %q: %w", l.k.user, aerr)
			default:
				unknown, lastErr = true, aerr
			}
		}
		if wctx.Err() != nil {
			break
		}
		if w == nil && l.cfg.notify {
			var ready bool
			w, ready = l.c.notifier.join(l.k.notify, l, token)
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
			return attempts, 0, fmt.Errorf("lock: acquire %q: %w after %v: %w", l.k.user, ErrNotAcquired, l.cfg.wait, lastErr)
		}
		return attempts, 0, fmt.Errorf("lock: acquire %q: %w after %v", l.k.user, ErrNotAcquired, l.cfg.wait)
	}
	// Match both ctx.Err() and, when the canceller gave one, its cause.
	ended := ctx.Err()
	if cause = context.Cause(ctx); cause != nil && cause != ended {
		ended = fmt.Errorf("%w (%w)", ended, cause)
	}
	if lastErr != nil {
		return attempts, 0, fmt.Errorf("lock: acquire %q: %w: %w (last error: %w)", l.k.user, ErrNotAcquired, ended, lastErr)
	}
	return attempts, 0, fmt.Errorf("lock: acquire %q: %w: %w", l.k.user, ErrNotAcquired, ended)
}

// backoff returns the n-th sleep: uniform in [min, min(max, min·2^n)].
func (l *Lock) backoff(n int) time.Duration {
	return lockutil.Backoff(l.cfg.backoffMin, l.cfg.backoffMax, n)
}

func (l *Lock) observe(e Event) {
	if o := l.cfg.observer; o != nil {
		e.Key = l.k.user
		o.Observe(e)
	}
}
