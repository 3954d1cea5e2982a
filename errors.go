package lock

import (
	"errors"

	"github.com/agentlock/lock/internal/lease"
)

var (
	// ErrNotAcquired is returned by [Lock.Acquire] and [Client.WithLock] when
	// the wait ended (wait timeout, or ctx done: then the error matches
	// context.Cause(ctx) too) without the lock being held.
	ErrNotAcquired = lease.ErrNotAcquired

	// ErrNotHeld is returned by [Lock.Release], [Lock.Extend] and [Lock.TTL]
	// when Redis says the hold is no longer ours (expired, deleted or taken
	// over), or when the handle was never acquired.
	ErrNotHeld = lease.ErrNotHeld

	// ErrLockLost is the cause of a [Client.WithLock] context cancelled because
	// the hold ended involuntarily, and is matched by the error WithLock
	// returns then. Errors of type [*LostError] match it.
	ErrLockLost = lease.ErrLockLost

	// ErrClosed is returned by Acquire, TryAcquire, Extend and WithLock after
	// [Client.Close], and by a Limiter's Allow, Reserve and Wait.
	ErrClosed = lease.ErrClosed

	// ErrInvalid is wrapped by every error that reports bad input: an empty
	// key, a nil client, an out-of-range option, an Extend with ttl <= 0.
	//
	// The sentinels are the ones every lock kind returns (package redlock
	// too); their texts are "lock: not acquired", "lock: not held", "lock:
	// lock lost", "lock: client closed" and "lock: invalid argument".
	ErrInvalid = lease.ErrInvalid

	// ErrPanicked is matched by the error of work the library does on a
	// goroutine of its own, with no caller for a panic to go on to, when a
	// call it made there panicked (a go-redis hook, the Observer, the
	// logger): the renewal error behind a [LostError] (renewal is retried,
	// and the hold lost at its safety deadline while the calls keep
	// panicking); the error of a call that rode a shared pipeline led from
	// the background; a redlock node's call. Each such panic is logged once
	// at Error level, with its stack, through [WithLogger]. Its text is
	// "lock: call panicked". A panic on the caller's own goroutine goes on
	// to the caller.
	ErrPanicked = lease.ErrPanicked
)

// ErrOnceFailed is matched by the error [Client.Once] and [OnceValue]
// return when they find a failure stored by [WithErrorTTL]: fn failed in
// another call, and the error's text carries fn's.
var ErrOnceFailed = errors.New("lock: once failed")

// ErrContended is matched by the error [Lock.Acquire] and [Client.WithLock]
// return at once, without waiting, when [WithMaxWaiters] callers already
// wait for the key in this Client.
var ErrContended = errors.New("lock: contended")

func invalidf(format string, args ...any) error { return lease.Invalidf(format, args...) }

// ErrNoLeader is returned by [Election.Leader] when nobody leads the
// election: no candidate won a term, or the last one resigned or its term
// ran out.
var ErrNoLeader = errors.New("lock: no leader")
