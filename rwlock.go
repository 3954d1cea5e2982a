package lock

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// RWLock is a read-write lock: many readers at once, or one writer. Its
// holds are ordinary [*Lock] handles ([RWLock.ReadLock], [RWLock.WriteLock])
// with every verb of a mutex's: each reader's hold is leased, renewed and
// lost on its own, so a crashed reader keeps a writer out for at most its
// TTL. A waiting writer stops new readers, so readers never starve it; its
// mark expires soon after it dies or gives up. Each write hold takes a new
// fence; a read hold carries the last writer's, below the next writer's.
//
// [ReleaseWatch], [WithOwner], [WithReplicaAck] and [WithFair] given to
// [Client.NewRWLock] are [ErrInvalid] (set on the Client, a read-write lock
// ignores them); so is an acquire on a key that another kind of lock holds.
// An RWLock is safe for concurrent use; it talks to no server until a
// handle's verb does. See docs/guide.md#read-write-locks and
// docs/safety.md#read-write-locks.
type RWLock struct {
	key   string
	cfg   *settings // nil when err is set
	err   error     // the configuration error, returned by every verb
	keys  luascripts.Keys
	read  rwSide
	write rwSide
}

// rwSide is what the holds of one side (readers or writers) of an RWLock
// share.
type rwSide struct {
	rw   *RWLock
	mode any // "read" or "write", boxed once
	// acquireKeys are rw_acquire.lua's KEYS, releaseKeys rw_release.lua's,
	// lockKeys rw_extend.lua's and rw_pttl.lua's: with the holder-info hash
	// last when the holds write holder info.
	acquireKeys, releaseKeys, lockKeys []string
}

// rwTag marks the policies of read-write locks (lease.Policy.Tag).
type rwTag struct{}

var (
	argRead, argWrite any = "read", "write"
)

// NewRWLock returns a read-write lock on key, configured by the Client's
// options and then opts, as [Client.NewLock] is. A key's read-write lock
// excludes the mutex and the semaphore on the same key. Configuration
// errors (those of NewLock, and an option a read-write lock does not take:
// see [RWLock]) are reported, wrapping [ErrInvalid], by every verb of its
// handles. NewRWLock talks to no server and starts nothing.
func (c *Client) NewRWLock(key string, opts ...Option) *RWLock {
	rw := &RWLock{key: key}
	if c.zero() {
		rw.err = keyError(key, errZeroClient)
		return rw
	}
	cfg, err := c.kindConfig(kindRW, opts)
	if err == nil {
		err = c.checkKey(key)
	}
	if err != nil {
		rw.err = keyError(key, err)
		return rw
	}
	s := c.settings(cfg)
	// Handoff is the mutex's: a release hands a waiter a mutex hold.
	s.pol.Strategy = lease.Contend
	s.ops = rwOps
	s.pol.Tag = rwTag{}
	rw.cfg = s
	rw.keys = luascripts.NewKeys(s.prefix, key)
	acq := []string{rw.keys.Lock(), rw.keys.Fence(), rw.keys.Companion(luascripts.RWWaiting)}
	rel := []string{rw.keys.Lock(), rw.keys.Notify(), acq[2]}
	lk := rw.keys.LockKeys()
	if s.info != nil {
		h := rw.keys.Holders()
		acq, rel, lk = append(acq, h), append(rel, h), rw.keys.InfoLockKeys()
	}
	rw.read = rwSide{rw: rw, mode: argRead, acquireKeys: acq, releaseKeys: rel, lockKeys: lk}
	rw.write = rwSide{rw: rw, mode: argWrite, acquireKeys: acq, releaseKeys: rel, lockKeys: lk}
	return rw
}

// Key returns the caller's key; "" on a nil RWLock.
func (rw *RWLock) Key() string {
	if rw == nil {
		return ""
	}
	return rw.key
}

// ReadLock returns a new handle on one shared hold of the lock: it may be
// held while other readers hold the lock, never while a writer does, and
// it waits while a writer waits. Each call returns a new handle; use one
// per reader. Its verbs report the RWLock's configuration error, and on a
// nil or zero RWLock an error wrapping [ErrInvalid].
func (rw *RWLock) ReadLock() *Lock { return rw.handle(func(rw *RWLock) *rwSide { return &rw.read }) }

// WriteLock returns a new handle on the exclusive hold of the lock: held
// only while no one else holds the lock. Its Acquire marks the writer
// waiting while it waits (see [RWLock]); its TryAcquire, which will not
// come back, marks nothing. Each call returns a new handle; use one per
// writer. Errors as for [RWLock.ReadLock].
func (rw *RWLock) WriteLock() *Lock {
	return rw.handle(func(rw *RWLock) *rwSide { return &rw.write })
}

// errZeroRWLock is what the handles of a zero or nil RWLock report.
var errZeroRWLock = invalidf("zero RWLock: make read-write locks with Client.NewRWLock")

// handle returns a new handle on side of rw.
func (rw *RWLock) handle(side func(*RWLock) *rwSide) *Lock {
	l := &Lock{}
	switch {
	case rw == nil:
		l.hd.Fail("", keyError("", errZeroRWLock))
	case rw.err != nil:
		l.hd.Fail(rw.key, rw.err)
	case rw.cfg == nil:
		l.hd.Fail(rw.key, keyError(rw.key, errZeroRWLock))
	default:
		l.cfg, l.rw = rw.cfg, side(rw)
		l.hd.Init(&rw.cfg.pol, rw.keys)
	}
	return l
}

// WithReadLock acquires a read hold (waiting, as [Lock.Acquire]), runs fn,
// and releases the hold, also when fn panics; as [Client.WithLock] does,
// with the same errors and the same context for fn.
func (rw *RWLock) WithReadLock(ctx context.Context, fn func(context.Context) error) error {
	l := rw.ReadLock()
	return lease.WithLock(ctx, "lock", &l.hd, l.kind(), fn)
}

// WithWriteLock acquires the write hold (waiting, as [Lock.Acquire]), runs
// fn, and releases the hold, also when fn panics; as [Client.WithLock]
// does.
func (rw *RWLock) WithWriteLock(ctx context.Context, fn func(context.Context) error) error {
	l := rw.WriteLock()
	return lease.WithLock(ctx, "lock", &l.hd, l.kind(), fn)
}

// rwMarkTTL is how long a writer's waiting mark lives: twice the most a
// waiter sleeps between attempts, so a live writer renews it in time.
func (s *settings) rwMarkTTL() time.Duration {
	return max(2*s.backoffMax, 200*time.Millisecond)
}

// rwKind is a read-write lock's handle as the engine sees it (lease.Kind).
type rwKind Lock

// Token returns a random UUID v4.
func (k *rwKind) Token() (string, error) { return lease.NewToken() }

// Try sends one acquire of Acquire: a writer that must wait marks itself
// waiting.
func (k *rwKind) Try(ctx context.Context, token string) lease.Attempt {
	return k.try(ctx, token, k.cfg.rwMarkTTL())
}

// rwTry is a read-write lock's handle as TryAcquire passes it to the
// engine: a writer's one attempt marks nothing, since it will not come
// back. A struct of one pointer costs no allocation as an interface.
type rwTry struct{ *rwKind }

// Try sends one acquire.
func (k rwTry) Try(ctx context.Context, token string) lease.Attempt { return k.try(ctx, token, 0) }

// try sends one acquire; a writer that must wait marks itself waiting for
// mark (0: not).
func (k *rwKind) try(ctx context.Context, token string, mark time.Duration) lease.Attempt {
	start := time.Now()
	cfg := k.cfg
	args := []any{token, ttlArg(cfg.ttl), k.rw.mode, flag(cfg.fencing), ms(mark)}
	if cfg.info != nil {
		args = append(args, cfg.info)
	}
	n, err := rwRun(ctx, (*Lock)(k).rwBackend(), k.cfg.rwAudit(&k.hd.Keys, token, 0), luascripts.RWAcquire, 0, false, k.rw.acquireKeys, args...)
	if err != nil {
		if kerr := rwOtherKind(k.hd.Keys.User, err, "read-write lock"); kerr != nil {
			return lease.Attempt{Err: kerr, Final: true}
		}
		return lease.Attempt{Err: err, Unknown: sent(err), Final: !retryable(err)}
	}
	ok, fence, left := luascripts.AcquireReply(n)
	return lease.Attempt{OK: ok, Fence: fence, Sent: start, PTTL: left}
}

// Undo removes what an attempt with token may have set: its hold, and its
// waiting mark.
func (k *rwKind) Undo(ctx context.Context, token string) { _, _ = (*Lock)(k).rwRelease(ctx, token, 0) }

// Release drops h. A read-write lock's release hands nothing over: it
// wakes every waiter when it frees the lock.
func (k *rwKind) Release(ctx context.Context, h *lease.Hold, _ bool) lease.Outcome {
	return (*kind)(k).checkForced(ctx, h, outcome((*Lock)(k).rwRelease(ctx, h.Token(), h.Fence())))
}

func (l *Lock) rwRelease(ctx context.Context, token string, fence int64) (extendStatus, error) {
	n, err := rwRun(ctx, l.rwBackend(), l.cfg.rwAudit(&l.hd.Keys, token, fence), luascripts.RWRelease, 1, true, l.rw.releaseKeys, token)
	return checkStatus("release", n, err)
}

// CheckTTL refuses a TTL Redis cannot hold.
func (k *rwKind) CheckTTL(ttl time.Duration) error { return (*kind)(k).CheckTTL(ttl) }

// Extend sends one extend of h.
func (k *rwKind) Extend(ctx context.Context, h *lease.Hold, ttl time.Duration) (lease.Outcome, <-chan struct{}) {
	n, err := rwRun(ctx, (*Lock)(k).rwBackend(), k.cfg.rwAudit(&k.hd.Keys, h.Token(), h.Fence()), luascripts.RWExtend, 2, false, k.rw.lockKeys, h.Token(), ttlArg(ttl))
	return (*kind)(k).checkForced(ctx, h, outcome(checkStatus("extend", n, err))), nil
}

// rwPTTL is TTL's call for a read-write hold (see pttl).
func (l *Lock) rwPTTL(ctx context.Context, token string) (time.Duration, error) {
	return pttlReply(rwRun(ctx, l.rwBackend(), nil, luascripts.RWPTTL, 3, false, l.rw.lockKeys, token))
}

// rwBackend is what a read-write lock's scripts go through: its backend
// (a read-write lock is always in script mode).
func (l *Lock) rwBackend() *scriptBackend { return l.cfg.be.(*scriptBackend) }

// rwRun sends script (luascripts.RWAll[i]) by EVALSHA, then by EVAL if the
// server lacks it, each command once when once is set (a release: see
// luascripts.OnceCmd), and returns its integer reply. With au, it sends
// the script's audited variant, which writes au's entry (audit_script.go).
func rwRun(ctx context.Context, b *scriptBackend, au *auditCall, s *redis.Script, i int, once bool, keys []string, args ...any) (int64, error) {
	src := luascripts.RWSources[i]
	if au != nil {
		s, src = luascripts.Audited(s)
		keys, args = luascripts.AuditArgs(keys, args, au.stream, &au.e, nil)
	}
	s, src = b.pub.script(ctx, s, src)
	n, err := rwSend(ctx, b, "evalsha", s.Hash(), once, keys, args)
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The server ran nothing: sending the whole script is safe.
		n, err = rwSend(ctx, b, "eval", src, once, keys, args)
	}
	return n, err
}

// rwSend sends one command through the Client's coalescer, unless
// coalescing is off. A call that made it into a shared pipeline waits for
// its reply even when ctx ends (the mutex's extend does the same): so the
// undo of an acquire never overtakes it. The verb returns by its deadline
// all the same, the call running bounded (see keepsDeadlines). A call still
// queued when ctx ends is never sent (sent reports false).
func rwSend(ctx context.Context, b *scriptBackend, verb, script string, once bool, keys []string, args []any) (int64, error) {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, verb, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	cmd := redis.NewIntCmd(ctx, append(a, args...)...)
	var c redis.Cmder = cmd
	if once {
		c = &luascripts.OnceCmd{Cmder: cmd}
	}
	if b.co == nil {
		_ = b.rdb.Process(ctx, c) // the error is in cmd
		return cmd.Result()
	}
	if err := b.co.lane(ctx, keys[0]).do(ctx, c, false); err != nil {
		return 0, err
	}
	return cmd.Result()
}

// rwOtherKind is the error for a script's "KIND <kind>" reply: the key holds
// another kind of lock than want. nil for any other error.
func rwOtherKind(key string, err error, want string) error {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return nil
	}
	msg := rerr.Error()
	if !strings.HasPrefix(msg, "KIND ") {
		return nil
	}
	// A script error reply may carry the script's location after the kind.
	found := strings.Fields(msg[len("KIND "):])
	if len(found) == 0 {
		return nil
	}
	name := found[0]
	if name == "rw" {
		name = "read-write lock"
	}
	return invalidf("key %q is a %s, not a %s", key, name, want)
}
