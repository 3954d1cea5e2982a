package lock

import (
	"errors"
	"fmt"

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

// LossReason says why a hold ended involuntarily.
type LossReason int

const (
	// LossStolen: the key holds another token; someone else has the lock.
	LossStolen = LossReason(lease.LossStolen)
	// LossExpired: the key is gone and our lease had run out by our clock,
	// typically after a process pause or with renewal off.
	LossExpired = LossReason(lease.LossExpired)
	// LossForceReleased: an operator's [Client.ForceRelease] or
	// [admin.Admin.ForceReleaseToken] removed the hold: its message reached the
	// holder's process, or its next renewal found the key gone and the
	// record the force release leaves behind for the hold's remaining TTL.
	LossForceReleased = LossReason(lease.LossForceReleased)
	// LossUnreachable: renewal could not confirm the hold before the local
	// safety deadline, so the hold is given up before it could expire; the
	// last renewal failed with a connection error (a dial error, a refused,
	// reset or closed connection) or another error. See LossUnanswered.
	LossUnreachable = LossReason(lease.LossUnreachable)
	// LossMaxHold: the hold reached the cap set with [WithMaxHold] and was no
	// longer renewed.
	LossMaxHold = LossReason(lease.LossMaxHold)
	// LossUnanswered: renewal was not answered before the local safety
	// deadline, and no renewal met a connection error: the server is slow,
	// stopped or overloaded, or the round trip too long for the TTL. The
	// hold is given up before it could expire.
	LossUnanswered = LossReason(lease.LossUnanswered)
	// LossVanished: the key is gone although our lease should still have
	// been valid, and no force release removed it: Redis lost its data
	// (restart without persistence, failover with async replication,
	// eviction), or the key was deleted behind our back.
	LossVanished = LossReason(lease.LossVanished)
)

// String returns the reason in a word or two, as used in error messages.
func (r LossReason) String() string {
	if s := lease.Reason(r).Name(); s != "" {
		return s
	}
	return fmt.Sprintf("LossReason(%d)", int(r))
}

// LostError describes a hold that ended involuntarily. It matches
// [ErrLockLost] under errors.Is, and its Err (the last renewal error, when
// there was one) too. It is the cause of a [Client.WithLock] context and
// is returned by [Lock.LostErr].
type LostError struct {
	Key    string     // the caller's key
	Reason LossReason // why the hold ended
	Err    error      // the renewal error behind LossUnreachable or LossUnanswered, or nil
}

// Error reports the key and the reason.
func (e *LostError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("lock: lock %q lost (%s): %s", e.Key, e.Reason, lease.Bare(e.Err))
	}
	return fmt.Sprintf("lock: lock %q lost (%s)", e.Key, e.Reason)
}

// Unwrap yields [ErrLockLost] and the underlying error, if any.
func (e *LostError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrLockLost, e.Err}
	}
	return []error{ErrLockLost}
}

// ErrOnceFailed is matched by the error [Client.Once] and [OnceValue]
// return when they find a failure stored by [WithErrorTTL]: fn failed in
// another call, and the error's text carries fn's.
var ErrOnceFailed = errors.New("lock: once failed")

// ErrContended is matched by the error [Lock.Acquire] and [Client.WithLock]
// return at once, without waiting, when [WithMaxWaiters] callers already
// wait for the key in this Client.
var ErrContended = errors.New("lock: contended")

func invalidf(format string, args ...any) error { return lease.Invalidf(format, args...) }

// newLostError is the cause of a loss the engine reports.
func newLostError(key string, r lease.Reason, err error) error {
	return &LostError{Key: key, Reason: LossReason(r), Err: err}
}
