// Package lease is the engine every lock kind of agentlock runs on. The
// core's kinds (package lock: the mutex, re-entrant or not, the fair lock,
// the read-write lock's read and write holds, the semaphore's permit, the
// multi-lock, Once's lock) and the quorum lock (package redlock) are thin
// types over it: a kind knows how to talk to Redis — its scripts, its
// quorum — and how its waiters wait; the engine knows, once, how to hold a
// lease over those calls.
//
// # The engine
//
// What every hold shares lives here: its token and fence, its TTL and
// safety deadline, renewal in batches, Lost and LostErr, the wake-ups of
// its waiters, and Close. None of it asks which kind it serves: a kind
// brings its Redis calls as a Kind and its way of waiting as a Strategy,
// both fixed when its handle is made.
//
// # The Kind interface
//
// A Kind is what the verbs need from the kind for one handle: a token, one
// acquire attempt, the undo of an attempt, and the release and extend of a
// hold. A kind makes it from its Lock by a pointer conversion, or a struct
// of one pointer, stored in the Lock when the Lock is made, so passing it
// costs no allocation. What an attempt found comes back as an Attempt; what
// a release, extend or renewal found, as an Outcome.
//
// # Strategies
//
// A Strategy is how an Acquire waits where kinds differ, and the wait loop
// (Handle.wait, its steps in waitRun) only ever calls it. Contend, the
// read-write lock's: attempts race, and an Acquire queues behind the
// waiters of its process already listening instead of racing the one a
// release wakes; the attempts of one Acquire share a token, so a reply lost
// on the network is confirmed by the next, and the engine undoes what a
// failed Acquire may have left. HandOff, the mutex's and the permit's, is
// Contend whose waiters a release in this process may hand its hold (the
// Notifier's Claim and Settle, the waiter's Gift). Eager, Once's, listens
// from the start and makes its first attempt at once, behind waiters or
// not, since a stored result is one round trip away. FIFO, the fair
// lock's, joins its queue in Redis with the first attempt, listening on the
// key and on its Client's inbox before it, and always takes its token out
// of the queue when it gives up, which Close waits for. Fresh, redlock's
// and the multi-lock's, gives every attempt a token of its own and leaves
// the undo of a failed attempt to the attempt itself, so a late undo can
// never free what a later attempt took.
//
// # Types
//
//	Engine  one per kind's Client: the renewal loop, the wake-up
//	        subscriptions (its Notifier) and every goroutine the Client
//	        owns (renewal calls, the undo of an attempt whose outcome is
//	        unknown). Close stops them and waits.
//	Policy  one per configuration (a Client's defaults, or one lock's own
//	        options): TTL, renewal on or off, wait timeout and backoff, the
//	        safety margin, Observer and logger, and the kind's per-config
//	        hooks (Group: which renewal batch a hold joins; Lost: the
//	        kind's *LostError).
//	Handle  the engine's part of one lock handle, embedded in the kind's
//	        Lock: the lock's keys (luascripts.Keys, the one storage layout),
//	        its Policy, its current hold and the busy flag. Its verbs
//	        (TryAcquire, Acquire, Release, Extend, RunHeld for WithLock) are
//	        the whole of a kind's verbs but for the Redis calls.
//	Kind    what a verb needs from the kind for one call on one handle: a
//	        token, one acquire attempt, the undo of an attempt, the release
//	        and the extend of a hold. A kind passes a pointer conversion of
//	        its Lock, so the interface costs no allocation.
//	Strategy
//	        how the kind's Acquire waits (Contend, HandOff, Eager, FIFO,
//	        Fresh), the Policy's Strategy, chosen when the kind makes it.
//	Hold    one acquisition: token, fence, Lost and LostErr, the onLost
//	        callbacks (WithLock's context), the bookkeeping that tells a
//	        Release from a loss, and its term.
//
// # A hold's term and its safety deadline
//
// A hold's term is its renewal state: the TTL that renewals send, when the
// write that last confirmed the hold was sent, and its safety deadline:
// sent + TTL − Policy.Margin(TTL). The core's margin is a tenth of the TTL
// plus 2ms; redlock's is its clock-drift allowance. A hold not confirmed
// again by its deadline is declared lost then, before Redis could let
// anyone else in. Times are readings of the monotonic clock (mono), a third
// of a time.Time's size.
//
// Writes of one hold go out one at a time where they can: an Extend waits
// for the hold's renewal out (its answer bounded by the renewal call's
// deadline), and the renewal loop holds a renewal back while an Extend is
// out, until a third of a TTL before the deadline. Otherwise a renewal,
// carrying the TTL the hold had when it went out, could land after an
// Extend and set that TTL again.
//
// Writes may still overlap (Extends of one hold, or a renewal sent past a
// slow Extend), and Redis keeps whichever lands last, which no reply
// tells. So a write
// confirmed by its reply moves the deadline to its own only when it was
// sent after every other write was answered and none is out; otherwise the
// hold keeps the earliest deadline any of them could have set and renews at
// once, with the current TTL, when all are answered: that renewal lands
// last. An Extend's deadline counts from when it is sent, and a shorter one
// lowers the hold's deadline before the call goes out, whatever its reply
// or the renewal's later say. A write counts as out until its call has
// returned — for redlock, until every node's call has; a write whose call
// failed landed, if at all, before its failure was reported.
//
// A write whose outcome is unknown — failed after it may have been sent,
// unanswered by its caller's deadline, or, for redlock, not answered by
// some node — may still land later, after writes sent since. So each hold
// keeps the shortest TTL of such writes (its ttlCap): from then on every
// deadline counts on no more than min(TTL, cap), and renewals come every
// min(TTL, cap)/3, still sending the full TTL. The cap is never lifted
// within a hold.
//
// Close gives every hold in the heap a timer at its deadline before it
// waits for anything; a hold whose renewal call is out gets its timer when
// the call returns.
//
// # Renewal: one loop, batches per group
//
// Every hold of an Engine is in one heap, ordered by when the loop must
// look at it next: its renewal (every TTL/3 with the watchdog on), its
// WithMaxHold cap, or its safety deadline. A renewal due within TTL/12 is
// sent early, so holds acquired close together share round trips.
//
// Due holds are grouped by their Group, which Policy.Group returns for each
// hold at send time: a Group is what one renewal call may carry. The core's
// group is (backend, cluster master), so a stalled master delays no hold on
// another; redlock's is (Client, node timeout), and its Renew sends one
// pipeline per node and tallies each hold's quorum. Each group is sent in
// chunks of at most 500 holds, each chunk by one goroutine of the Engine,
// with a deadline just before the earliest safety deadline in it; while the
// call is out the engine watches the deadlines itself (go-redis ignores a
// context deadline unless ContextTimeoutEnabled is set), and an Extend
// that lowers one makes it look again. Renew reports one Outcome per hold:
// Renewed, Gone, Stolen, Forced or, the zero value, Failed — a hold its Group did
// not answer for is retried, never renewed or lost by mistake.
//
// One lease for many holds fits this shape without a rewrite. A kind that
// wants renewal to cost O(slots) instead of O(locks) — a per-process
// session key per cluster slot, each hold valid while its session is —
// returns from Group a session group per slot, whose Renew extends the
// session key once for the whole batch and reports that outcome for every
// hold in it: the Redis cost is then one command per slot and tick. To make
// the loop's own work O(slots) too, the heap's entries would become the
// sessions: a session is a term (the renewal fields of a Hold, which the
// Engine's mu guards) shared by many holds, and the heap, the deadline
// rules and the watch over calls in flight already work on those fields.
//
// Close stops the loop. Holds still held are no longer renewed: each gets
// a timer that reports it lost at its deadline.
//
// # Waiting
//
// Handle.Acquire is the wait loop of every kind, steered by the handle's
// Strategy: attempts until the lock is held, ctx is done or Policy.Wait
// passes; between attempts a jittered
// exponential backoff capped by the holder's remaining TTL, cut short by a
// wake-up from the Notifier. The Notifier is the Engine's pub/sub: a kind
// says where a channel's messages come from (the core: its one client, a
// Ring's shard; redlock: every node). A release wakes the longest-waiting
// waiter of the channel in this process, and a release in this process may
// hand its hold straight to that waiter (the handoff hook: Notifier.Claim,
// Settle and the waiter's gift). A message's payload (message.go) says whom it wakes: the
// longest-waiting waiter (a release), every waiter (MsgAll), or the one
// whose token it names (MsgTo, a fair queue's head). Every failed attempt is reported to the
// Observer (EventAttemptFailed) and logged, at debug level, then as a
// warning after a few in a row.
//
// # Calls that must not outlive the caller
//
// Every verb returns by its caller's deadline (and Acquire by its wait
// timeout), give or take the scheduling of a goroutine. When the caller's
// context has a deadline the kind's client would not keep (Policy.Bounded:
// the client lacks ContextTimeoutEnabled, or its calls ride shared
// pipelines), the call runs on a goroutine of its own and the verb stops
// waiting at the deadline; what the call still does is settled in the
// background, by the Engine: an acquire that may have taken the lock is
// undone once its call returns, an Extend counts as out until then. An
// attempt whose outcome is unknown is likewise undone on a goroutine of the
// Engine, bounded by Policy.UndoTimeout; the verb waits for that undo only
// until its caller's context ends. WithLock's release after fn runs on a
// goroutine of the Engine too, waited for until the caller's deadline.
// Close waits for these background tasks up to BackgroundWait (5s).
//
// # Errors
//
// The sentinels (ErrNotAcquired, ErrNotHeld, ErrLockLost, ErrClosed,
// ErrInvalid) are defined here, with their texts, and the root package
// re-exports them, so every kind returns the same values; so are the event
// kinds and loss reasons, from which the root package defines its
// constants. A verb's error is
// an *OpError ("lock: release \"k\": not held"): package, verb and key said
// once, each wrapped error's own "lock: " or "redlock: " prefix dropped.
package lease
