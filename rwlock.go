package lock

import (
	"context"

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
