package lock

import (
	"log/slog"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// MinTTL is the shortest lease [WithTTL] and [Lock.Extend] accept; shorter
// ones are [ErrInvalid]. Each renewal's round trip must fit in about half
// the TTL, so a shorter lease is lost to pauses a healthy system takes in
// its stride. No TTL survives an overloaded machine: pick one well above
// the worst pause you expect. See docs/design/min-ttl.md.
const MinTTL = lease.MinTTL

// Defaults, documented on the options that change them.
const (
	DefaultTTL        = 30 * time.Second
	DefaultBackoffMin = 10 * time.Millisecond
	DefaultBackoffMax = 500 * time.Millisecond
	DefaultPrefix     = "lock:"
)

// Option configures a [Client] (as the default for its locks) or one lock
// ([Client.NewLock], [Client.WithLock] and the other kinds' constructors).
// Invalid values are reported as an error wrapping [ErrInvalid] by the
// first call that uses them. Some options apply to some kinds of lock only
// (each one's doc says which): given to a kind it does not apply to, an
// option that asks for something (WithFair(true), not WithFair(false)) is
// an error wrapping ErrInvalid that names the option and the kind, reported
// by every verb of that lock; set on the Client, it is a default for the
// kinds it applies to, and the others ignore it.
type Option func(*config)

// WithTTL sets the lease length: how long Redis keeps the lock if its holder
// stops renewing it (crash, partition). Default 30s; at least [MinTTL]
// (100ms), counted in whole milliseconds. An acquire whose reply arrives
// after the lease's safety deadline (TTL less a tenth and 2ms) is undone and
// counts as failed, so a TTL must exceed the worst round trip by a wide
// margin. Pick it well above the worst pause you expect (GC, network, a slow
// Redis), since a hold that cannot be renewed within it is lost; with the
// watchdog on, the critical section may run far longer.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl; c.given |= optTTL } }

// WithWatchdog turns renewal on or off. On (the default), the Client renews
// every held lock at TTL/3 until it is released, and [Lock.Lost] closes if a
// renewal finds it gone or cannot confirm it in time. Off, the hold simply
// expires after the TTL unless extended; Lost still closes at the safety
// deadline.
func WithWatchdog(on bool) Option { return func(c *config) { c.watchdog = on; c.given |= optWatchdog } }

// WithWaitTimeout bounds how long [Lock.Acquire] waits for a held lock.
// Default 0: wait until ctx is done. Negative is invalid.
func WithWaitTimeout(d time.Duration) Option {
	return func(c *config) { c.wait = d; c.given |= optWaitTimeout }
}

// WithBackoff bounds the sleep between attempts of a waiting Acquire. The
// n-th sleep is drawn uniformly from [min, min(max, min·2^n)] (exponential
// backoff with jitter), and never lasts past the holder's remaining TTL.
// Defaults 10ms and 500ms: a release wakes waiters at once through pub/sub
// (see [WithNotify]), so the timer is only the fallback for a missed message,
// and 500ms keeps that fallback cheap for Redis while still bounded. Both must
// be positive and min <= max.
func WithBackoff(min, max time.Duration) Option {
	return func(c *config) { c.backoffMin, c.backoffMax = min, max; c.given |= optBackoff }
}

// WithNotify sets whether a waiting Acquire listens for release messages
// (default on). Releases always publish; off, waiters rely on the backoff
// timer and the holder's TTL alone. A [MultiLock] never listens:
// WithNotify(true) given to it is [ErrInvalid], and on the Client it
// ignores the option.
func WithNotify(on bool) Option { return func(c *config) { c.notify = on; c.given |= optNotify } }

// WithReleaseMode picks [ReleaseScript] (default) or [ReleaseWatch].
// ReleaseWatch applies to plain mutexes ([Client.NewLock],
// [Client.WithLock]) only: every other kind needs scripts, and given
// ReleaseWatch is [ErrInvalid]; set on the Client, ReleaseWatch is the
// plain mutexes' default, and the other kinds ignore it and run scripts.
func WithReleaseMode(m ReleaseMode) Option {
	return func(c *config) { c.mode = m; c.given |= optReleaseMode }
}

// WithPrefix sets the prefix of every Redis key of a lock (default "lock:").
// The lock for key K lives at prefix+"{K}"; the prefix must not contain '{'
// or '}'. It may be empty.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p; c.given |= optPrefix } }

// WithOwner makes holds re-entrant for one owner id: locks on the same key
// with the same owner may be held at once, and the lock is free again when
// every such hold is released. The key becomes a hash: the owner's field
// counts its holds, and each hold has a field of its own (the owner id, '#',
// and a random id), so an acquire whose reply was lost and which is retried
// or resent counts once, a Release drops only its own hold, and a failed
// acquisition undoes only its own. The token of such a hold ([Lock.Token])
// is the owner id. Nested holds share one expiry, which acquisitions and
// renewals lengthen but never shorten. Needs [ReleaseScript]; the id must not
// be empty. Default: no owner, every hold exclusive. The owner id is the
// whole identity: two processes given the same id both hold the key at
// once, so give each process (or task) an id of its own. It applies to mutexes
// ([Client.NewLock], [Client.WithLock]) that are not fair ([WithFair]);
// given to another kind it is [ErrInvalid], and set on the Client the other
// kinds ignore it.
func WithOwner(id string) Option {
	return func(c *config) { c.owner, c.ownerSet = id, true; c.given |= optOwner }
}

// WithObserver sets the [Observer] told of acquisitions, releases, extends,
// renewal failures and losses. nil (the default) means none, at no cost.
// It takes one observer: for several, pass [Observers](a, b), which gives
// each every event in order. Given more than once, the last one counts.
// Given to a lock, it replaces the Client's observer for that lock (the
// Client's is not told of it); WithObserver(nil) there silences the lock.
func WithObserver(o Observer) Option {
	return func(c *config) { c.observer = o; c.given |= optObserver }
}

// WithLogger sets where the library logs renewal failures and losses (as
// warnings) and failed acquire attempts (at debug level; a warning at the
// third in a row and every tenth after). nil (the default) means silent.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l; c.given |= optLogger } }

// WithMaxHold caps how long a hold is renewed, counted from its acquisition:
// past it the watchdog stops and the hold is reported lost ([LossMaxHold])
// before its TTL runs out. A guard against a critical section that never
// ends. Default 0: no cap. Negative is invalid.
func WithMaxHold(d time.Duration) Option {
	return func(c *config) { c.maxHold = d; c.given |= optMaxHold }
}

// WithFencing sets whether each acquisition increments the key's fencing
// counter (default on; see [Lock.Fence]). The counter is a small Redis key,
// P{K}:fence, that lives a minute from its creation, so keys used once leave
// nothing behind; a missing counter restarts from the server's clock in
// microseconds, so fences keep increasing across its expiry (docs/safety.md
// states the assumptions: a server clock that does not go back). Off, Fence
// returns 0 and no counter is written.
func WithFencing(on bool) Option { return func(c *config) { c.fencing = on; c.given |= optFencing } }

// WithCoalescing sets whether a lock's calls may share round trips with
// other calls of the same Client (default on). While a few calls are out at
// once, further calls wait and then go out together as one pipeline (per
// master on a Cluster), which raises throughput under load; a lone call is
// sent at once. Calls in a shared pipeline show in go-redis hooks as a
// pipeline. A call whose ctx ends while queued returns at once, unsent; one
// sent returns by its ctx's deadline, its outcome unknown. ReleaseWatch and
// [WithReplicaAck] calls are never coalesced. See
// docs/design/storage.md#round-trips-and-coalescing.
func WithCoalescing(on bool) Option {
	return func(c *config) { c.coalesce = on; c.given |= optCoalescing }
}

// WithReplicaAck makes an acquisition count only once n replicas have
// confirmed it: right after the acquire, on the same connection, the lock
// sends WAIT n timeout to the master holding the key. With fewer
// acknowledgements the lock releases what it set (for a re-entrant lock,
// that hold alone) and the call fails with an error wrapping
// [ErrNotAcquired]. This narrows, but does not close, the
// window in which a failover to a replica that missed the write grants the
// lock twice (see docs/safety.md). Default 0: no WAIT. n must not be negative and
// timeout must be at least 1ms when n > 0; needs [ReleaseScript] and a
// *redis.Client (including failover clients) or *redis.ClusterClient. It
// applies to mutexes that are not fair ([WithFair]), re-entrant or not;
// n > 0 given to another kind is [ErrInvalid], and set on the Client the
// other kinds ignore it.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(c *config) { c.acks, c.ackTimeout = n, timeout; c.given |= optReplicaAck }
}

// WithResultTTL sets how long [Client.Once] keeps a result: every caller
// within that time gets it without fn running. Default [DefaultResultTTL]
// (10 minutes); at least 1ms, counted in whole milliseconds. A stored
// result always expires; [Client.Forget] drops it sooner. It applies to
// Once ([OnceValue], Forget) only: given to another kind it is
// [ErrInvalid], and set on the Client the other kinds ignore it.
func WithResultTTL(d time.Duration) Option {
	return func(c *config) { c.resultTTL = d; c.given |= optResultTTL }
}

// WithErrorTTL makes [Client.Once] store a failure of fn for d, as it
// stores a result: the waiters, and every caller until it expires, get an
// error wrapping [ErrOnceFailed] with fn's error text instead of running fn
// again, for failures the whole fleet should not retry at once (a provider
// rate-limiting, a bad input). Default 0: a failure is not stored, and the
// next caller runs fn. d must be 0 or at least 1ms. It applies to Once
// only, as [WithResultTTL] does.
func WithErrorTTL(d time.Duration) Option {
	return func(c *config) { c.errorTTL = d; c.given |= optErrorTTL }
}
