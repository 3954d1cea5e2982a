package lock

import (
	"context"
	"time"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// WithFair makes a mutex fair (default off): the Acquires waiting for its
// key, in every process, get it in the order they arrived, through a queue
// kept in Redis beside the lock. A Release hands the key to the queue's
// head in the same script and wakes that waiter alone; with nobody queued
// the key is freed as a plain lock's is. A waiter that dies or hangs leaves
// the queue [FairEntryTimeout] after its last attempt; an Acquire that gives
// up leaves it on its way out. [Lock.TryAcquire] takes only a free key that
// nobody waits for and never queues; [Lock.Waiters] reads the queue's length.
// Fairness holds among fair locks: a plain lock may take the key when free.
//
// Only a mutex can be fair: WithFair(true) given to another kind, or with
// [ReleaseWatch], [WithOwner], [WithReplicaAck], [WithHolderInfo] or
// [WithMetadata], is [ErrInvalid]; set on the Client, it makes its mutexes
// fair and the other kinds ignore it. See docs/guide.md#fair-locks and
// docs/safety.md#fair-locks.
func WithFair(on bool) Option { return func(c *config) { c.fair = on; c.given |= optFair } }

// FairEntryTimeout returns how long a fair lock's queued waiter keeps its
// place without trying again, for a lock whose backoff's upper bound is
// backoffMax ([WithBackoff]): four times that bound, and at least 2s. A
// waiting Acquire tries at least every backoffMax, so a live waiter keeps
// its place while a dead one loses it within this time.
func FairEntryTimeout(backoffMax time.Duration) time.Duration {
	return max(4*backoffMax, 2*time.Second)
}

// fairBackoffMin is the least sleep of a fair lock's queued waiter: half
// the backoff's upper bound (or min, if larger). The head is woken by its
// message, so the others need only keep their places and cover a lost
// message; polling sooner would cost Redis a call per waiter and section.
func fairBackoffMin(lo, hi time.Duration) time.Duration {
	return max(lo, hi/2)
}

// validateFair reports the options a fair lock cannot take.
func (cfg *config) validateFair() error {
	switch {
	case !cfg.fair:
		return nil
	case cfg.mode != ReleaseScript:
		return invalidf("fair lock: needs ReleaseScript")
	case cfg.ownerSet:
		return invalidf("fair lock: cannot be re-entrant (WithOwner)")
	case cfg.acks > 0:
		return invalidf("fair lock: cannot use WithReplicaAck")
	}
	return nil
}

// Waiters returns how many Acquires wait in the queue of l's key now, in
// every process: the fair queue's live entries ([WithFair]). It is 0 for a
// key no fair lock waits on. It asks Redis; it returns an error wrapping
// [ErrInvalid] for a lock built with invalid options, or the Redis error.
// The count is a snapshot: a waiter that died is counted until its place
// expires ([FairEntryTimeout]).
func (l *Lock) Waiters(ctx context.Context) (int, error) {
	if err := l.handle().Usable(); err != nil {
		return 0, err
	}
	var n int
	err := l.cfg.c.callBounded(ctx, func() (err error) {
		n, err = luascripts.FairWaiters.Run(ctx, l.cfg.c.rdb, []string{l.hd.Keys.QueueTimes()}).Int()
		return err
	})
	if err != nil {
		return 0, l.hd.Err("waiters", err)
	}
	return n, nil
}

// fairKind is a fair Lock as the engine sees it (lease.Kind); fairTry is
// the same for TryAcquire, which never joins the queue.
type (
	fairKind Lock
	fairTry  Lock
)

func (k *fairKind) Token() (string, error) { return (*kind)(k).Token() }

func (k *fairKind) CheckTTL(ttl time.Duration) error { return (*kind)(k).CheckTTL(ttl) }

func (k *fairKind) Extend(ctx context.Context, h *lease.Hold, ttl time.Duration) (lease.Outcome, <-chan struct{}) {
	return (*kind)(k).Extend(ctx, h, ttl)
}

// Try sends one fair acquire, joining the queue if the key is not ours.
func (k *fairKind) Try(ctx context.Context, token string) lease.Attempt {
	return (*Lock)(k).tryFair(ctx, token, FairEntryTimeout(k.cfg.backoffMax))
}

// Undo releases what an attempt with token took and takes token out of
// the queue. Redis refuses token's attempts from then on, for as long as a
// queue entry would live (FairEntryTimeout): one that reaches it late must
// not queue the token again, or take the key, for a waiter that is gone.
func (k *fairKind) Undo(ctx context.Context, token string) {
	_, _ = (*Lock)(k).releaseFair(ctx, token, FairEntryTimeout(k.cfg.backoffMax))
}

// Release drops h, handing the key to the queue's head, if any.
func (k *fairKind) Release(ctx context.Context, h *lease.Hold, _ bool) lease.Outcome {
	return (*kind)(k).checkForced(ctx, h, outcome((*Lock)(k).releaseFair(ctx, h.Token(), 0)))
}

func (k *fairTry) Token() (string, error)             { return (*fairKind)(k).Token() }
func (k *fairTry) CheckTTL(ttl time.Duration) error   { return (*fairKind)(k).CheckTTL(ttl) }
func (k *fairTry) Undo(ctx context.Context, t string) { (*fairKind)(k).Undo(ctx, t) }
func (k *fairTry) Release(ctx context.Context, h *lease.Hold, ended bool) lease.Outcome {
	return (*fairKind)(k).Release(ctx, h, ended)
}
func (k *fairTry) Extend(ctx context.Context, h *lease.Hold, ttl time.Duration) (lease.Outcome, <-chan struct{}) {
	return (*fairKind)(k).Extend(ctx, h, ttl)
}

// Try takes the key only if it is free and nobody is queued.
func (k *fairTry) Try(ctx context.Context, token string) lease.Attempt {
	return (*Lock)(k).tryFair(ctx, token, 0)
}

// tryFair runs fair_acquire.lua with token; wait is the queue entry's
// timeout, 0 not to join.
func (l *Lock) tryFair(ctx context.Context, token string, wait time.Duration) lease.Attempt {
	start := time.Now()
	k := &l.hd.Keys
	n, err := luascripts.FairAcquire.Run(ctx, l.cfg.c.rdb,
		[]string{k.Lock(), k.Fence(), k.Queue(), k.QueueTimes(), k.QueueGone()},
		token, ttlArg(l.cfg.ttl), flag(l.cfg.fencing), ms(wait), l.cfg.c.eng.Notifier.ID()).Int64()
	if err != nil {
		if kerr := kindReply(k.User, err, "fair lock"); kerr != nil {
			return lease.Attempt{Err: kerr, Final: true}
		}
		return lease.Attempt{Err: err, Unknown: true, Final: l.final(err)}
	}
	ok, fence, left := luascripts.AcquireReply(n)
	return lease.Attempt{OK: ok, Fence: fence, Sent: start, PTTL: left}
}

// releaseFair runs fair_release.lua for token, once; Redis refuses
// token's attempts for refuse from then on (0: not at all).
func (l *Lock) releaseFair(ctx context.Context, token string, refuse time.Duration) (extendStatus, error) {
	k := &l.hd.Keys
	s, src := l.cfg.c.pub.script(ctx, luascripts.FairRelease, luascripts.FairReleaseSrc)
	n, err := luascripts.RunOnceSrc(ctx, l.cfg.c.rdb, s, src,
		[]string{k.Lock(), k.Fence(), k.Queue(), k.QueueTimes(), k.QueueGone(), k.Notify()},
		token, ttlArg(l.cfg.ttl), flag(l.cfg.fencing), ms(refuse), l.cfg.c.eng.Notifier.ID()).Int64()
	return checkStatus("release", n, err)
}
