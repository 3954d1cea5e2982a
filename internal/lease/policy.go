package lease

import (
	"context"
	"log/slog"
	"strconv"
	"time"
)

// Policy is one configuration of locks: a Client's defaults, or one lock's
// own options. Many handles share one; the engine never changes it.
type Policy struct {
	Engine *Engine // the Client's
	Pkg    string  // "lock" or "redlock": errors and log messages start with it

	TTL        time.Duration // of a new hold
	Watchdog   bool          // renew every TTL/3
	MaxHold    time.Duration // no renewal past this, counted from the acquisition; 0: no cap
	Wait       time.Duration // Acquire's wait timeout; 0: until ctx is done
	BackoffMin time.Duration // the first sleep between attempts
	BackoffMax time.Duration // the cap on a sleep between attempts
	Notify     bool          // waiters listen for release messages
	Fencing    bool          // holds carry a fence (the handoff script needs to know)
	Owner      string        // a re-entrant owner id, shown as the token of every hold; "" for none
	// Bounded: the kind's calls may outlive their context's deadline (the
	// client lacks ContextTimeoutEnabled, or shares pipelines), so a verb
	// whose ctx has a deadline runs its call on a goroutine and stops
	// waiting at the deadline.
	Bounded bool
	// UndoTimeout bounds the calls made on the caller's behalf once its own
	// context may be gone: the undo of an attempt, WithLock's release.
	UndoTimeout time.Duration

	// Margin is how long before sent+ttl a hold not confirmed again is
	// declared lost.
	Margin func(ttl time.Duration) time.Duration
	// Group returns the renewal batch h joins now (see Group).
	Group func(ctx context.Context, h *Hold) Group
	// Lost returns the kind's error for a loss: a *LostError of the root
	// package, which matches ErrLockLost.
	Lost func(key string, r Reason, err error) error
	// Observe is the kind's Observer, converting the event; nil for none.
	Observe func(Event)
	// ObserveContext, when not nil (the Observer is a context observer,
	// and Observe is set), is told when WithLock begins (an
	// EventWithLockStart) and returns the context the call goes on with
	// (see WithLock).
	ObserveContext func(context.Context, Event) context.Context
	Logger         *slog.Logger // nil: silent
	// Tag is the kind's own mark on its policies, which the engine never
	// reads: a Group that renews holds of several kinds in one call tells
	// them apart by it. nil for the core's mutex.
	Tag any
	// Inbox is the channel the Client's holds listen on while held, so
	// that a force-release (MsgForce) reports them lost at once
	// (force.go); "" for none.
	Inbox string
	// Gate, when not nil, is the Client's in-process gate (the core's
	// WithFallback and WithMaxWaiters): every Acquire and TryAcquire
	// enters it before its first attempt, and every attempt asks it first.
	Gate Gate
	// Strategy is how the kind's Acquire waits (Contend, HandOff,
	// Eager, FIFO, Fresh), chosen when the kind makes its Policy; nil is
	// Contend.
	Strategy Strategy
}

// Gate is a Client's in-process record of the acquisitions and holds of
// its keys (Policy.Gate).
type Gate interface {
	// Enter admits an acquisition on hd before its first attempt: an
	// Acquire (wait) or a TryAcquire. An error ends the acquisition at
	// once with that error.
	Enter(hd *Handle, wait bool) (GatePass, error)
}

// GatePass is one acquisition's entry in a Gate.
type GatePass interface {
	// Open reports whether an attempt may be sent now; false: the key is
	// held in this process, so the attempt, unsent, finds the lock held.
	Open() bool
	// Leave ends the acquisition, which took h (nil: none). With a hold,
	// the entry lasts until h ends (Hold.OnEnd).
	Leave(h *Hold)
}

// EventKind says what an Event reports. The root package names it
// lock.EventKind (a type alias) and its values, so each is defined here
// alone.
type EventKind int

// The kinds of events. Add new ones at the end: the values are public.
const (
	EventAcquireStart EventKind = iota + 1
	EventAcquire
	EventRelease
	EventExtend
	EventRenewalFailed
	EventLost
	EventAttemptFailed
	EventRenewed
	EventWithLock
	EventFallback
	// EventLimit: a rate limiter's call ended (the root package emits it;
	// the engine never does).
	EventLimit
	EventWithLockStart
)

var eventNames = [...]string{
	EventAcquireStart:  "acquire_start",
	EventAcquire:       "acquire",
	EventRelease:       "release",
	EventExtend:        "extend",
	EventRenewalFailed: "renewal_failed",
	EventLost:          "lost",
	EventAttemptFailed: "attempt_failed",
	EventRenewed:       "renewed",
	EventWithLock:      "with_lock",
	EventFallback:      "fallback",
	EventLimit:         "limit",
	EventWithLockStart: "with_lock_start",
}

// String returns a short snake_case name, fit for a metric label, or
// "event_n" for a value that is none of the kinds.
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "event_" + strconv.Itoa(int(k))
}

// Event is one thing that happened to one lock; the root package's Event
// has the same fields.
type Event struct {
	Kind     EventKind       // what happened
	Ctx      context.Context // the caller's, for caller-side events; nil for background ones
	Key      string          // the caller's key
	Token    string          // the public token (Policy.Owner for a re-entrant hold)
	Fence    int64           // the hold's fence; 0 before one exists
	Duration time.Duration   // how long the call took (Acquire: the whole wait)
	Attempts int             // acquire: attempts sent; a failed attempt: its number
	Err      error           // nil on success
	TTL      time.Duration   // EventRenewed: the TTL the renewal set
	Held     time.Duration   // EventRelease, EventLost, EventWithLock: since the hold's acquire was sent
	Validity time.Duration   // EventRenewed: time the hold had left before it would have expired
}

// publicToken is the token events show for token: the owner id for a
// re-entrant hold.
func (p *Policy) publicToken(token string) string {
	if p.Owner != "" && token != "" {
		return p.Owner
	}
	return token
}

// enter tells the context observer, if any, that a WithLock on key began
// with ctx, and returns the context the call goes on with: the one the
// observer returned, or ctx when it returned nil.
func (p *Policy) enter(key string, ctx context.Context) context.Context {
	if p.ObserveContext == nil {
		return ctx
	}
	if c := p.ObserveContext(ctx, Event{Kind: EventWithLockStart, Ctx: ctx, Key: key}); c != nil {
		return c
	}
	return ctx
}

// observe tells the Observer, if any, of e on key.
func (p *Policy) observe(key string, e Event) {
	if p.Observe != nil {
		e.Key = key
		e.Token = p.publicToken(e.Token)
		p.Observe(e)
	}
}

// Status is what Redis said of one hold a call asked about. The zero value
// is Failed: a call that did not answer for a hold neither confirms it nor
// reports it gone.
type Status int

const (
	Failed    Status = iota // no answer: the call failed (Outcome.Err), or said nothing of this hold
	Confirmed               // still ours: extended, renewed or released
	Gone                    // the key is gone
	Stolen                  // someone else's token is there
	Forced                  // the key is gone, and a force release removed this hold
)

// Outcome is what one call found for one hold.
type Outcome struct {
	Status Status // what the call found
	Err    error  // Failed: why; nil otherwise
	// Unknown: some call of the write failed after it may have been sent,
	// or was not answered (a redlock node), so it may still land later
	// with its TTL. A Failed outcome is always taken as unknown.
	Unknown bool
}

// Group is the key of a renewal batch and the sender of its calls: holds
// for which Policy.Group returns equal Groups (a comparable value) are
// renewed together, up to 500 in one call. The core's is (backend, cluster
// master); redlock's is (Client, node timeout). See the package comment for
// how one lease per slot would fit.
type Group interface {
	// Renew asks Redis to extend every hold hs[i] to ttls[i] and fills
	// out[i] with what it found. ctx ends just before the earliest safety
	// deadline among hs. Renew returns once no write of the call can still
	// land; the engine watches the deadlines meanwhile.
	Renew(ctx context.Context, hs []*Hold, ttls []time.Duration, out []Outcome)
}

// Attempt is what one acquire attempt found.
type Attempt struct {
	OK    bool          // the lock is held with the attempt's token
	Fence int64         // OK: the hold's fence
	Sent  time.Time     // OK: when the call that took it was sent; the lease counts from then
	PTTL  time.Duration // !OK and Err nil: the holder's remaining TTL, 0 if unknown
	Err   error         // the attempt failed; nil when someone else holds the lock
	// Unknown: the attempt failed after it may have reached Redis, so it
	// may hold the lock; the engine undoes it (with a shared token).
	Unknown bool
	// Final: Err will not mend by trying again; Acquire stops.
	Final bool
	// Spent: the attempt took the lock and a release of its token was sent
	// to undo it (a reply too late, too few replica acknowledgements). That
	// release may land late, after a later attempt took the key, so the
	// token is never used again by this Acquire.
	Spent bool
	// Done: !OK and Err nil: the attempt found what its caller waits for
	// without needing the hold (Once: a stored result), which the kind
	// keeps. Acquire stops, holding nothing, with an error matching ErrDone.
	Done bool
}

// Kind is what a verb asks of the lock kind, for one handle. A kind passes
// a pointer conversion of its Lock (no allocation).
type Kind interface {
	// Token returns a token for a new hold (or attempt, with Fresh).
	Token() (string, error)
	// Try makes one acquire attempt with token.
	Try(ctx context.Context, token string) Attempt
	// Undo removes what an attempt with token may have set; it runs on a
	// goroutine of the engine, after the attempt's call has returned, with
	// a ctx bounded by Policy.UndoTimeout.
	Undo(ctx context.Context, token string)
	// Release drops h in Redis. ended reports that h had already ended
	// (released, or lost): then it only cleans up, handing nothing over.
	Release(ctx context.Context, h *Hold, ended bool) Outcome
	// CheckTTL reports a TTL the kind cannot hold, wrapping ErrInvalid.
	CheckTTL(ttl time.Duration) error
	// Extend sets h's TTL to ttl in Redis. settled, when not nil, closes
	// once no write of the call can still land (redlock's late nodes);
	// until then the engine counts the Extend as out.
	Extend(ctx context.Context, h *Hold, ttl time.Duration) (o Outcome, settled <-chan struct{})
}
