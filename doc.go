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
// [Client.NewLimiter] is a rate limit shared by the fleet rather than a
// lock: N units per period, on the Redis server's clock. [Limiter.Wait]
// and [Limiter.Reserve] queue units in reservation order, and a
// [Reservation] settles with the units a call really used, as a model
// call's tokens are known only after it.
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
// under it. The examples/ directory has runnable programs: session (state
// updates), ragcache (cache rebuild with stampede protection), toolcall
// (at-most-once tool calls), llmquota (request and token rates, concurrency)
// and fencing; each runs with `go run`.
package lock
