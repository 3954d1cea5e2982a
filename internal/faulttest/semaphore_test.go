package faulttest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestProcess_permitHolderPaused: TestProcess_holderPaused on the one permit
// of a semaphore of 1. A worker process holding it is SIGSTOPped for twice
// the TTL; a holder here gets the permit once the paused one's expiry has
// passed on the server's clock, and writes to the fenced store; the
// resumed worker's late write with its old fence is rejected and its
// Lost() fires.
func TestProcess_permitHolderPaused(t *testing.T) {
	holderPaused(t, "permit_holder_paused", permitKind("paused", 1))
}

// aclSemaphore is the least privilege of a semaphore: the script mode's
// and the sorted-set commands its scripts call (README, ACLs).
var aclSemaphore = slices.Concat(aclScript, []string{
	"+zadd", "+zrem", "+zscore", "+zcard", "+zcount", "+zrange", "+zremrangebyscore",
})

// TestSecurity_semaphoreACL runs every verb of a semaphore's permits as an
// ACL user granted aclSemaphore, with a waiter of another Client woken by
// a release.
func TestSecurity_semaphoreACL(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.ACLSetUser(ctx, "locker", "locker-pw", aclSemaphore...); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	o := s.Options()
	o.Username, o.Password = "locker", "locker-pw"
	rdb := redis.NewClient(o)
	defer rdb.Close()
	locks := lock.NewClient(rdb, lock.WithTTL(2*time.Second))
	defer locks.Close()
	others := lock.NewClient(rdb, lock.WithTTL(2*time.Second))
	defer others.Close()

	sem := locks.NewSemaphore("acl", 2)
	a, b := sem.Permit(), sem.Permit()
	for _, p := range []*lock.Lock{a, b} {
		if err := p.Acquire(ctx); err != nil {
			t.Fatalf("Acquire() error = %v", err)
		}
	}
	if ok, err := sem.Permit().TryAcquire(ctx); ok || err != nil {
		t.Fatalf("TryAcquire() with n out = %v, %v, want false, nil", ok, err)
	}
	if n, err := sem.Available(ctx); n != 0 || err != nil {
		t.Fatalf("Available() = %d, %v, want 0, nil", n, err)
	}
	if err := a.Extend(ctx, 3*time.Second); err != nil {
		t.Fatalf("Extend() error = %v", err)
	}
	if d, err := a.TTL(ctx); d <= 0 || err != nil {
		t.Fatalf("TTL() = %v, %v", d, err)
	}
	waited := make(chan error, 1)
	go func() {
		err := others.NewSemaphore("acl", 2).WithPermit(ctx, func(context.Context) error { return nil })
		waited <- err
	}()
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release() error = %v", err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("waiter's WithPermit() error = %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatalf("Release() error = %v", err)
	}
}
