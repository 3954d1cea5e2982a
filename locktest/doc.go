// Package locktest runs the locks of github.com/agentlock/lock on an
// embedded Redis inside a test, and injects the faults a critical section
// must survive, so that a test can check that code under a lock stops when
// the lock is lost.
//
//	locks, ctl := locktest.New(t, lock.WithTTL(time.Second))
//	err := locks.WithLock(ctx, "job:1", func(ctx context.Context) error {
//		ctl.Steal("job:1")
//		<-ctx.Done() // cancelled, cause a *lock.LostError, at the next renewal
//		return context.Cause(ctx)
//	})
//	// errors.Is(err, lock.ErrLockLost)
//
// Each fault and what the holder sees ([lock.LostError]'s Reason):
//
//	Controller.Expire         key gone, no wake-up     LossVanished
//	Controller.ForceRelease   key gone, waiters woken  LossForceReleased
//	Controller.Steal          another token holds it   LossStolen
//	Controller.PauseRenewals  renewals held back       LossUnanswered
//	Controller.Unreachable    connections cut          LossUnreachable (LossUnanswered
//	                                                   when go-redis's retries keep the
//	                                                   connection error from the renewal)
//	Controller.Slow(d)        replies late by d        LossUnanswered, if d
//	                                                   passes the safety deadline
//
// The core cannot tell a key that expired early from one deleted, or lost
// by a Redis restart, so an Expire reads as a vanished key; LossExpired is
// what a hold gets whose own TTL ran out without renewal
// (WithWatchdog(false)).
//
// Faults are deterministic: a steal, expiry or forced release is noticed at
// the holder's next renewal (every TTL/3), and a pause or an outage at its
// safety deadline, so a test waits on Lost() or on its context, never on a
// sleep. A short TTL (lock.WithTTL, at least lock.MinTTL) makes those waits
// short.
//
// The package is its own module, so that its embedded server (miniredis)
// stays out of the lock's dependencies.
package locktest
