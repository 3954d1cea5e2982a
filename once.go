package lock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// DefaultResultTTL is how long [Client.Once] keeps a result when
// [WithResultTTL] does not say.
const DefaultResultTTL = 10 * time.Minute

// MaxResultSize is the largest result, in bytes, [Client.Once] stores:
// 1 MiB. A larger one is not stored, and Once returns an error wrapping
// [ErrInvalid]. Every waiter reads the whole value in one reply, and the
// store must land within the release's few seconds: a Once result is an
// answer or a receipt; keep bulk data elsewhere and store its address.
// (On the 2-core test VM under load, a 16 MiB SET took over 200ms.)
const MaxResultSize = 1 << 20

// Once runs fn once across every process that shares Redis, and gives every
// caller its result: a distributed singleflight with a cache. It returns
// the result and whether it came from another call (shared).
//
// A stored result is returned in one round trip without running fn.
// Otherwise one caller runs fn under the lock on key (as [Client.NewLock]),
// the others wait and read what it stored; calls of one Client for the key
// share one call to Redis. fn's result is stored, for [WithResultTTL], by
// the release and only while the hold is still ours: a caller whose hold
// was lost gets an error matching [ErrLockLost], and fn may then have run
// twice; pass the key or [OnceFence] downstream as an idempotency key. When
// fn fails nothing is stored (unless [WithErrorTTL]; then [ErrOnceFailed])
// and Once returns fn's error. A nil fn, an invalid option, [WithOwner],
// [ReleaseWatch], [WithReplicaAck] or [WithFair] is [ErrInvalid]. Safe for
// concurrent use. See docs/guide.md#once-run-once-share-the-result.
func (c *Client) Once(ctx context.Context, key string, fn func(context.Context) ([]byte, error), opts ...Option) ([]byte, bool, error) {
	l, err := c.onceLock(key, opts)
	if err != nil {
		return nil, false, err
	}
	if fn == nil {
		return nil, false, l.hd.Err("once", invalidf("nil func"))
	}
	rk := l.hd.Keys.Companion(resultName)
	wctx := ctx
	if l.cfg.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, l.cfg.wait)
		defer cancel()
	}
	for {
		f, lead := c.once.join(rk, l.cfg.maxWaiters)
		if f == nil {
			return nil, false, l.hd.Err("once", fmt.Errorf("%w: %d waiters already", ErrContended, l.cfg.maxWaiters))
		}
		if lead {
			return c.once.lead(rk, f, func() ([]byte, bool, bool, error) { return l.once(ctx, rk, fn) })
		}
		select {
		case <-f.done:
			c.once.leave(f)
			if f.shared && f.err != nil {
				return nil, true, f.err
			}
			if f.shared {
				return nonNil(bytes.Clone(f.v)), true, nil
			}
			// The call we followed failed in a way of its own (its ctx,
			// its fn's error): go to Redis ourselves.
		case <-wctx.Done():
			c.once.leave(f)
			return nil, false, l.hd.Err("once", ErrNotAcquired, context.Cause(wctx))
		}
	}
}

// once is Once's call to Redis on l: the stored result, or fn's under the
// lock. kept reports whether Redis holds what it returns: false for fn's
// value whose store was still out when ctx's deadline came (WithLock
// returned, the store going on in the background), and for any error not
// stored.
func (l *Lock) once(ctx context.Context, rk string, fn func(context.Context) ([]byte, error)) (v []byte, shared, kept bool, err error) {
	k := &onceKind{kind: (*kind)(l)}
	ak := l.hd.Keys.AcquireKeys()
	if l.cfg.info != nil {
		ak = l.hd.Keys.InfoAcquireKeys()
	}
	k.keys = append(append(k.keys[:0], ak...), rk)
	err = lease.WithLock(ctx, "lock", &l.hd, k, func(ctx context.Context) error {
		v, ferr := fn(context.WithValue(ctx, fenceKey{}, l.Fence()))
		if ferr == nil && len(v) > MaxResultSize {
			ferr = invalidf("result of %d bytes: over MaxResultSize (%d)", len(v), MaxResultSize)
		}
		k.val, k.ferr = v, ferr
		k.ran = true
		return ferr
	})
	if errors.Is(err, lease.ErrDone) {
		if st := k.found.Load(); st != nil {
			v, shared, err := st.read(l.hd.Keys.User)
			return v, shared, shared, err
		}
	}
	if err != nil {
		return nil, false, false, err
	}
	return nonNil(k.val), false, k.kept.Load(), nil
}

// OnceValue is [Client.Once] for a value of any type, stored as JSON: fn's
// value is encoded with encoding/json, and every caller, fn's own included,
// gets it decoded from that encoding, like [sync.OnceValue] across
// processes. An error encoding fn's value counts as fn's error; an error
// decoding a stored one (a type changed between deployments) is returned,
// with shared true. Errors otherwise as for Once.
func OnceValue[T any](ctx context.Context, c *Client, key string, fn func(context.Context) (T, error), opts ...Option) (T, bool, error) {
	var v T
	var f func(context.Context) ([]byte, error)
	if fn != nil {
		f = func(ctx context.Context) ([]byte, error) {
			v, err := fn(ctx)
			if err != nil {
				return nil, err
			}
			return json.Marshal(v)
		}
	}
	b, shared, err := c.Once(ctx, key, f, opts...)
	if err != nil {
		return v, shared, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, shared, lease.NewOpError("lock", "once", key, fmt.Errorf("decode stored result: %w", err))
	}
	return v, shared, nil
}

// Forget drops the result [Client.Once] stored for key (a value or a
// failure kept by [WithErrorTTL]), so that the next Once runs fn again. A
// Once of this Client that starts after Forget returned never shares a
// call to Redis that began before it, so it never gets the dropped result
// (the calls already waiting for one do; so may calls of other Clients,
// which share calls of their own). It does not wait for a Once running fn
// now: what that one stores stays. It returns nil also when nothing was
// stored; an error wrapping [ErrInvalid] for an empty key or invalid
// options (opts: Once's; only [WithPrefix] matters), or the Redis error.
// It works after [Client.Close].
func (c *Client) Forget(ctx context.Context, key string, opts ...Option) error {
	l, err := c.onceLock(key, opts)
	if err != nil {
		return err
	}
	rk := l.hd.Keys.Companion(resultName)
	err = c.callBounded(ctx, func() error { return c.rdb.Del(ctx, rk).Err() })
	// After the DEL (also one of unknown outcome): a call under way may
	// have read the result before it.
	c.once.cut(rk)
	if err != nil {
		return l.hd.Err("forget", err)
	}
	return nil
}

// OnceFence returns the fencing token of the hold under which
// [Client.Once] runs fn, read from fn's ctx (or a context derived from
// it); 0 for any other context, or with [WithFencing](false).
func OnceFence(ctx context.Context) int64 {
	f, _ := ctx.Value(fenceKey{}).(int64)
	return f
}

type fenceKey struct{}

// onceLock returns the lock Once holds on key: opts over the Client's
// defaults, with the Once policy (see onceSettings).
func (c *Client) onceLock(key string, opts []Option) (*Lock, error) {
	if c.zero() {
		return nil, keyError(key, errZeroClient)
	}
	cfg, err := c.kindConfig(kindOnce, opts)
	if err == nil {
		err = c.checkKey(key)
	}
	if err != nil {
		return nil, keyError(key, err)
	}
	os := c.onceSettings(cfg, len(opts) == 0)
	l := &Lock{}
	l.initMutex(os, luascripts.NewKeys(os.prefix, key))
	return l, nil
}

// onceSettings returns the settings of cfg with the Once policy: an
// Acquire listens for wake-ups from its start and tries at once, even
// behind waiters of this process (a stored result is one round trip away);
// a waiting Once is never handed a hold by a release in this process (it
// must look for a stored result first); and its fallback timer waits
// WithBackoff's max.
// The Client's defaults (dflt) get theirs made once.
func (c *Client) onceSettings(cfg config, dflt bool) *settings {
	if dflt {
		if os := c.once.set.Load(); os != nil {
			return os
		}
	}
	os := c.settings(cfg)
	os.pol.Strategy = lease.Eager
	// A waiter relies on the store's publish; its timer is only the
	// fallback for a missed message (or a holder that died), so it runs at
	// the backoff's upper bound rather than polling while fn runs.
	os.pol.BackoffMin = os.pol.BackoffMax
	if dflt {
		c.once.set.Store(os)
	}
	return os
}
