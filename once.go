package lock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
// caller its result: a distributed singleflight with a cache.
//
// If a result is stored for key, Once returns it in one round trip, with
// shared true, and fn does not run. Otherwise exactly one caller, in any
// process, runs fn while holding the lock on key — the same lock as
// [Client.NewLock] on key, renewed by the watchdog while fn runs — and the
// others wait, woken by publish rather than polling, then read what it
// stored (shared true). fn's ctx is cancelled, cause a [*LostError], if the
// hold is lost.
//
// fn's result is stored atomically with the release, and only while the
// hold is still ours: one script checks the token, writes the result for
// [WithResultTTL] (default [DefaultResultTTL]), deletes the lock and wakes
// every waiter. A caller whose hold was lost while fn ran stores nothing
// and gets an error matching [ErrLockLost]; by then another caller may be
// running fn too. Whatever fn does outside Redis (a charge, an e-mail) can
// therefore happen twice across such a loss: pass the key, or the hold's
// fence ([OnceFence] of fn's ctx), downstream as an idempotency key where
// that matters. The hold writes holder info as a mutex hold does
// ([WithMetadata], [WithHolderInfo]); [Client.Inspect] shows it, kind
// "mutex". Once returns by ctx's deadline: a store still unanswered then
// goes on in the background, as [Client.WithLock]'s release does, and Once
// returns fn's result; if that store fails, nothing is stored and the lock
// expires by its TTL.
//
// When fn returns an error, nothing is stored, Once returns that error, and
// one waiting caller runs fn in turn (one at a time, never all at once).
// With [WithErrorTTL] the failure is stored for that long instead: waiters,
// and callers until it expires, get an error wrapping [ErrOnceFailed] that
// carries fn's error text, shared true. A result over [MaxResultSize] is
// treated as a failure of fn, wrapping [ErrInvalid]. Results are bytes,
// binary-safe; nil and empty are both returned as an empty non-nil slice.
//
// Calls of one Client for the same key (and prefix) at the same time share
// one call to Redis, as golang.org/x/sync/singleflight does within a
// process: the others wait for it, bounded by their own ctx and
// [WithWaitTimeout], and get copies of its result, shared true, or of the
// failure it found stored. When that call ends otherwise (its ctx, its
// fn's error, a lost lock, a panic, fn's result whose store was still out
// at its caller's deadline), each of them goes to Redis itself,
// where fn runs again one caller at a time. So a stampede costs Redis a few
// calls per process, not per caller. With [WithMaxWaiters](n), the calls
// waiting for one under way count as its waiters: once n wait, a further
// call fails at once with an error wrapping [ErrContended].
//
// Once returns what [Client.WithLock] returns when the lock was never held
// ([ErrNotAcquired] at the end of the wait, [ErrClosed], [ErrInvalid]): for
// a nil fn, an invalid option, or [WithOwner], [WithReleaseMode](ReleaseWatch),
// [WithReplicaAck] or [WithFair], which
// Once does not support (set on the Client, Once ignores them). When fn
// panics, the lock is released without storing anything and the panic
// continues. opts override the Client's defaults for this call; the stored
// result lives at P{K}:result beside the lock, under the same hash tag, so
// Once works on a Redis Cluster. Safe for concurrent use.
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

// onceState is a Client's state for Once: its policy for the Client's
// defaults, and the calls under way, by result key.
type onceState struct {
	set atomic.Pointer[settings] // the defaults with Once's policy; made on first use

	mu      sync.Mutex
	flights map[string]*flight
}

// flight is one Once call to Redis that other calls of the same Client on
// the same key wait for instead of sending their own: in-process
// singleflight in front of the one across processes.
type flight struct {
	done   chan struct{}
	v      []byte
	err    error
	shared bool // the followers take v and err; otherwise each tries itself
	// followers counts the calls that joined, under onceState.mu (tests).
	followers int
	// waiting counts the calls that joined and still wait for it, under
	// onceState.mu: they count as waiters for WithMaxWaiters.
	waiting int
}

// join returns the flight under way for rk, or a new one that the caller
// leads (lead true); nil when maxWaiters (WithMaxWaiters; 0: no cap) calls
// already wait for the one under way.
func (o *onceState) join(rk string, maxWaiters int) (f *flight, lead bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if f = o.flights[rk]; f != nil {
		if maxWaiters > 0 && f.waiting >= maxWaiters {
			return nil, false
		}
		f.followers++
		f.waiting++
		return f, false
	}
	if o.flights == nil {
		o.flights = map[string]*flight{}
	}
	f = &flight{done: make(chan struct{})}
	o.flights[rk] = f
	return f, true
}

// leave counts a call that joined f as no longer waiting for it.
func (o *onceState) leave(f *flight) {
	o.mu.Lock()
	f.waiting--
	o.mu.Unlock()
}

// cut makes the call under way for rk, if any, no flight for calls that
// come later: they start their own. The calls that joined it still get its
// outcome.
func (o *onceState) cut(rk string) {
	o.mu.Lock()
	delete(o.flights, rk)
	o.mu.Unlock()
}

// lead makes call for f and ends f with its outcome, also when call
// panics (the panic continues; the followers then try themselves). Only
// what Redis keeps (call's kept true: a result or a failure stored by
// WithErrorTTL that it found, or fn's result that the leader stored) is
// shared; any other outcome is the leader's own (its ctx, its fn's error,
// even one that matches ErrOnceFailed because fn got it from another Once,
// fn's result whose store was still out at the leader's deadline) and is
// not.
func (o *onceState) lead(rk string, f *flight, call func() (v []byte, shared, kept bool, err error)) ([]byte, bool, error) {
	defer func() {
		o.mu.Lock()
		if o.flights[rk] == f { // not cut by Forget, which may have let a new one in
			delete(o.flights, rk)
		}
		o.mu.Unlock()
		close(f.done)
	}()
	v, shared, kept, err := call()
	if f.shared = kept; f.shared {
		// The caller owns v: the followers get copies of a copy.
		f.v, f.err = bytes.Clone(v), err
	}
	return v, shared, err
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

// resultName names the companion key P{K}:result.
const resultName = "result"

// A stored outcome is one byte saying what it is, the token of the hold
// that stored it and a newline, then fn's result or error text. The token
// makes the value unique to one hold, so that a resent store recognises its
// own (once_store.lua).
const (
	storedValue   = 'v'
	storedFailure = 'e'
)

// stored is what Redis keeps at P{K}:result.
type stored []byte

// encodeStored lays out what a hold with token stores.
func encodeStored(what byte, token string, data []byte) []byte {
	b := make([]byte, 0, 2+len(token)+len(data))
	b = append(b, what)
	b = append(b, token...)
	b = append(b, '\n')
	return append(b, data...)
}

// read returns what s says: a value, or the stored failure's error.
func (s stored) read(key string) ([]byte, bool, error) {
	i := bytes.IndexByte(s, '\n')
	if len(s) == 0 || i < 0 || (s[0] != storedValue && s[0] != storedFailure) {
		return nil, true, lease.NewOpError("lock", "once", key, fmt.Errorf("lock: stored result of %d bytes is not one Once wrote", len(s)))
	}
	data := s[i+1:]
	if s[0] == storedFailure {
		return nil, true, lease.NewOpError("lock", "once", key, ErrOnceFailed, errors.New(string(data)))
	}
	return nonNil(data), true, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

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

// onceKind is a Once's lock as the engine sees it: the mutex (kind), whose
// attempt also looks for a stored result and whose release stores fn's.
type onceKind struct {
	*kind
	keys  []string // once_acquire.lua's KEYS: acquire's (with holder info's), then P{K}:result
	found atomic.Pointer[stored]
	kept  atomic.Bool // Release stored fn's outcome (set on its goroutine)

	// Set by fn's wrapper, read by Release on the same goroutine.
	ran  bool
	val  []byte
	ferr error
}

// Try returns a stored result (Done), or makes the mutex's acquire attempt.
func (k *onceKind) Try(ctx context.Context, token string) lease.Attempt {
	start := time.Now()
	sb := k.cfg.be.(*scriptBackend)
	var au *auditCall
	if a := k.cfg.auditIn(&k.hd.Keys); a != nil {
		au = a.call(&k.hd.Keys, token, 0)
	}
	v, err := sb.onceAcquire(ctx, k.keys, token, k.cfg.ttl, k.cfg.info, au)
	if kerr := kindReply(k.hd.Keys.User, err, "mutex"); kerr != nil {
		// The acquire found another kind of lock at P{K}: bad input, not a
		// Redis failure.
		return lease.Attempt{Err: kerr, Final: true}
	}
	if err != nil {
		return lease.Attempt{Err: err, Unknown: sent(err), Final: !retryable(err)}
	}
	if s, ok := v.(string); ok {
		st := stored(s)
		k.found.Store(&st)
		return lease.Attempt{Done: true}
	}
	n, ok := v.(int64)
	if !ok {
		return lease.Attempt{Err: fmt.Errorf("lock: unexpected once acquire reply %T", v), Final: true}
	}
	ours, fence, left := luascripts.AcquireReply(n)
	return lease.Attempt{OK: ours, Fence: fence, Sent: start, PTTL: left}
}

// Release stores fn's outcome with the release when there is one to store
// and the hold was not lost; otherwise it releases as the mutex does
// (waking one waiter, who runs fn next).
func (k *onceKind) Release(ctx context.Context, h *lease.Hold, ended bool) lease.Outcome {
	what, ttl, msg := byte(storedValue), k.cfg.resultTTL, lease.MsgAll
	switch {
	case ended || !k.ran || h.LostErr() != nil:
		return k.kind.Release(ctx, h, ended)
	case k.ferr != nil && k.cfg.errorTTL == 0:
		return k.kind.Release(ctx, h, ended)
	case k.ferr != nil:
		what, ttl = storedFailure, k.cfg.errorTTL
		k.val = []byte(lease.Bare(k.ferr))
	}
	sb := k.cfg.be.(*scriptBackend)
	out := encodeStored(what, h.Token(), k.val)
	var au *auditCall
	if a := k.cfg.auditIn(&k.hd.Keys); a != nil {
		au = a.call(&k.hd.Keys, h.Token(), h.Fence())
	}
	n, err := sb.onceStore(ctx, &k.hd.Keys, k.keys[len(k.keys)-1], h.Token(), out, ttl, msg, au)
	// The store is safe to resend (once_store.lua): a call whose outcome is
	// unknown is sent again while ctx lasts, so a lost reply neither leaves
	// the lock to expire nor reports a result that landed as lost.
	for try := 0; err != nil && sent(err) && retryable(err) && ctx.Err() == nil && try < storeResends; try++ {
		n, err = sb.onceStore(ctx, &k.hd.Keys, k.keys[len(k.keys)-1], h.Token(), out, ttl, msg, au)
	}
	if k.ferr != nil {
		k.val = nil
	}
	st, err := checkStatus("once store", n, err)
	k.kept.Store(err == nil && st == extendOK)
	return k.checkForced(ctx, h, outcome(st, err))
}

// storeResends bounds how often a store whose outcome is unknown is sent
// again.
const storeResends = 3
