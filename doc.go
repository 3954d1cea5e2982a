// Package lock provides distributed locks over Redis: one holder at a time
// per key, across the processes and machines of a replicated service.
//
//	locks := lock.NewClient(rdb) // any redis.UniversalClient; one Client per process
//	defer locks.Close()
//	err := locks.WithLock(ctx, "session:"+id, func(ctx context.Context) error {
//		return updateSession(ctx, id) // ctx ends, cause ErrLockLost, if the lock is lost
//	})
//
// [Client.WithLock] acquires, runs a function and releases. [Client.NewLock]
// gives the explicit form: [Lock.Acquire] waits (until ctx is done or
// [WithWaitTimeout] passes, then [ErrNotAcquired]), [Lock.TryAcquire] tries
// once, [Lock.Release] and [Lock.Extend] act only on our own hold
// ([ErrNotHeld] otherwise). Waiters wake as soon as a holder releases.
//
// # Kinds of lock
//
// Every kind is built on the same leases; each hold is a [*Lock] or has its
// verbs. A read-write lock admits many readers at once, or one writer:
//
//	rw := locks.NewRWLock("index:" + tenant)
//	err := rw.WithReadLock(ctx, search) // WithWriteLock; ReadLock, WriteLock give *Lock
//
// A semaphore admits at most n holders at once, each holding a permit:
//
//	sem := locks.NewSemaphore("llm-quota:"+tenant, 8)
//	err := sem.WithPermit(ctx, callModel) // sem.Permit() gives a *Lock
//
// A fair lock hands the key to the waiters of every process in arrival order:
//
//	l := locks.NewLock("user:"+id, lock.WithFair(true))
//
// A multi-lock holds several keys, all or none, in an order that cannot
// deadlock:
//
//	err := locks.WithMultiLock(ctx, []string{"acct:1", "acct:2"}, transfer)
//
// Once runs a function once across the fleet and gives every caller its
// stored result, a distributed singleflight ([OnceValue] stores JSON):
//
//	val, shared, err := locks.Once(ctx, "rag:"+hash, build, lock.WithResultTTL(time.Hour))
//
// An election gives one leader per name; its terms are fencing tokens, and
// observers hear every change, "no leader" too:
//
//	err := locks.NewElection("scheduler").Lead(ctx, "host-a", runJobs)
//
// [Client.NewLimiter] is a rate limit shared by the fleet rather than a
// lock: N units per period, on the Redis server's clock. [Limiter.Wait]
// and [Limiter.Reserve] queue units in reservation order, and a
// [Reservation] settles with the units a call really used, as a model
// call's tokens are known only after it.
//
// Operators see and free holds with [Client.Inspect], [Client.List] and
// [Client.ForceRelease] (package admin and cmd/lockctl too). Package redlock
// gives a mutex with the same verbs over a quorum of independent Redis nodes.
//
// # What a lock guarantees, and what it does not
//
// A lock is a lease. Redis keeps it for a TTL, and the Client renews every
// held lock every TTL/3 until it is released. While Redis keeps its data, the
// key holds one token at a time, and nobody can release or extend a hold that
// is not theirs. When renewal finds the hold gone or taken, or cannot confirm
// it before the TTL would run out, the hold is declared lost before it can
// expire: [Lock.Lost] closes and the WithLock context is cancelled.
//
// The library cannot stop your code in time. A process paused (GC, swap, a
// stopped VM) past its TTL resumes inside its critical section while someone
// else holds the lock. And Redis replicates asynchronously: a failover, or a
// restart without persistence, can forget a lock and grant it twice. When a
// second holder would do harm rather than waste work, pass [Lock.Fence] with
// every write downstream, and have the store reject a fence lower than the
// highest it has seen.
//
// # Choosing a TTL
//
// The TTL bounds how long a crashed holder blocks everyone else, not how long
// a critical section may run: with renewal on (the default, [WithWatchdog]),
// a hold lasts as long as it is renewed. A hold that renewal cannot confirm
// for about nine tenths of its TTL is declared lost, so pick a TTL well above
// the longest pause you expect (GC, network trouble, a slow Redis). The
// default, 30s, rides out seconds of trouble; a shorter TTL hands a crashed
// holder's key over sooner but loses holds on shorter hiccups. With renewal
// off, the TTL must outlast the whole critical section, or call [Lock.Extend].
//
// docs/safety.md in the repository describes each failure mode and what holds
// under it. The examples/ directory has runnable programs, each run with
// `go run`: session (state updates), ragcache (cache rebuild with stampede
// protection), toolcall (at-most-once tool calls), fencing (a store that
// refuses stale writers), llmquota (request and token rates, concurrency), rwindex
// (readers and a rebuilding writer), scheduler (a leader runs a periodic
// job) and redlock (a quorum lock).
package lock
