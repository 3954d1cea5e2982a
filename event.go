package lock

import (
	"context"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// EventKind says what an [Event] reports. Its String method returns a
// short snake_case name, fit for a metric label ("acquire",
// "renewal_failed", …), or "event_n" for a value that is none of the kinds
// below.
type EventKind = lease.EventKind

const (
	// EventAcquireStart: Acquire or TryAcquire began.
	EventAcquireStart EventKind = lease.EventAcquireStart
	// EventAcquire: Acquire or TryAcquire ended; Err is nil when the lock is
	// held, otherwise the error returned (TryAcquire's "held by another" is
	// reported as [ErrNotAcquired]).
	EventAcquire EventKind = lease.EventAcquire
	// EventRelease: Release ended; Err as returned.
	EventRelease EventKind = lease.EventRelease
	// EventExtend: Extend ended; Err as returned.
	EventExtend EventKind = lease.EventExtend
	// EventRenewalFailed: one renewal of a held lock failed with Err. It is
	// retried, unless the hold's safety deadline has come: then an
	// EventLost follows.
	EventRenewalFailed EventKind = lease.EventRenewalFailed
	// EventLost: the hold ended involuntarily; Err is the [*LostError].
	EventLost EventKind = lease.EventLost
	// EventAttemptFailed: one attempt of Acquire or TryAcquire failed with
	// Err (Redis unreachable, a transient error reply, a reply too late to
	// trust); Attempts is its number. Acquire tries again until its wait
	// ends. An attempt that finds the lock held by another is no failure.
	EventAttemptFailed EventKind = lease.EventAttemptFailed
	// EventRenewed: the renewal loop confirmed a held lock. TTL is the TTL
	// the renewal set; Validity is what the hold had left, before it would
	// have expired, when the confirmation came: the renewal margin.
	EventRenewed EventKind = lease.EventRenewed
	// EventWithLock: [Client.WithLock] (or a kind's WithX) ended, after
	// its release; Duration is the whole call, Err what it returned (an
	// error of its own when fn panicked), Fence and Held those of the
	// hold, if the lock was acquired.
	EventWithLock EventKind = lease.EventWithLock
	// EventFallback: an Acquire or TryAcquire whose Redis attempt found
	// Redis unreachable (its EventAcquire carries that error) fell back to
	// an in-process lock ([WithFallback]). Err is nil when the local lock
	// was taken: the hold is degraded, and Degraded is true; otherwise Err
	// is why not (TryAcquire: [ErrNotAcquired] when the key is held in
	// this process).
	EventFallback EventKind = lease.EventFallback
	// EventLimit: a [Limiter]'s Allow, Reserve or Wait (or AllowAll,
	// ReserveAll, WaitAll, one event per limiter) ended. Units is what it
	// took, 0 when it took nothing; Duration, for a Wait, how long it
	// waited; Err is [ErrNotAcquired] for an Allow refused or a Wait given
	// up, or the call's error.
	EventLimit EventKind = lease.EventLimit
	// EventWithLockStart: [Client.WithLock] (or a kind's WithX) began. Only
	// a [ContextObserver] is told, through ObserveContext; Ctx is the
	// caller's context.
	EventWithLockStart EventKind = lease.EventWithLockStart
)

// Event is one thing that happened to one lock.
type Event struct {
	Kind     EventKind     // what happened
	Key      string        // the caller's key
	Token    string        // the hold's token, "" before one exists
	Fence    int64         // the hold's fence, 0 before one exists
	Duration time.Duration // time the call took (Acquire: the whole wait)
	Attempts int           // EventAcquire: tries sent to Redis; EventAttemptFailed: which one failed
	Err      error         // nil on success
	// Ctx is the caller's context for the events of a call (acquire,
	// attempt, release, extend), so a tracing Observer can join the
	// caller's trace; nil for background events (renewal failure, loss).
	Ctx context.Context
	// TTL is, for EventRenewed, the TTL the renewal set.
	TTL time.Duration
	// Held is, for EventRelease, EventLost and EventWithLock, how long the
	// hold lasted, counted from when its acquire was sent.
	Held time.Duration
	// Validity is, for EventRenewed, the time the hold had left before it
	// would have expired when the renewal was confirmed.
	Validity time.Duration
	// Degraded is true for the events of a degraded hold ([Lock.Degraded]):
	// the EventFallback that took it and its EventRelease.
	Degraded bool
	// Units is, for EventLimit, the units the call took.
	Units int64
}

// observerFunc adapts o to the engine's events.
func observerFunc(o Observer) func(lease.Event) {
	return func(e lease.Event) {
		o.Observe(Event{Kind: e.Kind, Key: e.Key, Token: e.Token, Fence: e.Fence,
			Duration: e.Duration, Attempts: e.Attempts, Err: e.Err, Ctx: e.Ctx,
			TTL: e.TTL, Held: e.Held, Validity: e.Validity})
	}
}
