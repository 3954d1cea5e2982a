package lock

import (
	"fmt"

	"github.com/agentlock/lock/internal/lease"
)

// LossReason says why a hold ended involuntarily. Its String method
// returns the reason in a word or two, as used in error messages
// ("stolen", "force-released", …), or "LossReason(n)" for a value that is
// none of the reasons below.
type LossReason = lease.Reason

const (
	// LossStolen: the key holds another token; someone else has the lock.
	LossStolen LossReason = lease.LossStolen
	// LossExpired: the key is gone and our lease had run out by our clock,
	// typically after a process pause or with renewal off.
	LossExpired LossReason = lease.LossExpired
	// LossForceReleased: an operator's [Client.ForceRelease] or
	// [admin.Admin.ForceReleaseToken] removed the hold: its message reached the
	// holder's process, or its next renewal found the key gone and the
	// record the force release leaves behind for the hold's remaining TTL.
	LossForceReleased LossReason = lease.LossForceReleased
	// LossUnreachable: renewal could not confirm the hold before the local
	// safety deadline, so the hold is given up before it could expire; the
	// last renewal failed with a connection error (a dial error, a refused,
	// reset or closed connection) or another error. See LossUnanswered.
	LossUnreachable LossReason = lease.LossUnreachable
	// LossMaxHold: the hold reached the cap set with [WithMaxHold] and was no
	// longer renewed.
	LossMaxHold LossReason = lease.LossMaxHold
	// LossUnanswered: renewal was not answered before the local safety
	// deadline, and no renewal met a connection error: the server is slow,
	// stopped or overloaded, or the round trip too long for the TTL. The
	// hold is given up before it could expire.
	LossUnanswered LossReason = lease.LossUnanswered
	// LossVanished: the key is gone although our lease should still have
	// been valid, and no force release removed it: Redis lost its data
	// (restart without persistence, failover with async replication,
	// eviction), or the key was deleted behind our back.
	LossVanished LossReason = lease.LossVanished
)

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

// newLostError is the cause of a loss the engine reports.
func newLostError(key string, r lease.Reason, err error) error {
	return &LostError{Key: key, Reason: r, Err: err}
}
