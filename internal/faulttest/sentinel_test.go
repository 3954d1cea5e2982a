package faulttest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestSentinel_failoverDuringHolds holds locks through a failover client
// (1 master, 1 replica, 3 sentinels) and SIGKILLs the master. Afterwards
// every hold must either still be on the new master under its token or be
// reported lost by Lost(); nothing may panic; new acquisitions must work.
func TestSentinel_failoverDuringHolds(t *testing.T) {
	const ttl = 5 * time.Second
	sn := redistest.StartSentinel(t, 1, 3)
	rdb := sn.Client(t)
	locks := lock.NewClient(rdb, lock.WithTTL(ttl))
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const n = 8
	held := make([]*lock.Lock, n)
	for i := range held {
		held[i] = locks.NewLock(fmt.Sprintf("sn-%d", i))
		if err := held[i].Acquire(ctx); err != nil {
			t.Fatalf("Acquire(%s) error = %v", held[i].Key(), err)
		}
	}
	killed := time.Now()
	addr, err := sn.KillMasterAndWaitFailover(ctx)
	if err != nil {
		t.Fatalf("KillMasterAndWaitFailover: %v", err)
	}
	failover := time.Since(killed)

	// New acquisitions resume through the same failover client.
	nl := locks.NewLock("sn-new")
	if err := nl.Acquire(ctx); err != nil {
		t.Fatalf("Acquire() after failover: %v", err)
	}
	resumed := time.Since(killed)
	if err := nl.Release(ctx); err != nil {
		t.Errorf("Release() after failover: %v", err)
	}

	// Give renewal a round to notice whatever the failover did, then
	// compare every handle's belief with the new master's data.
	time.Sleep(ttl/3 + ttl/12)
	newMaster := redis.NewClient(&redis.Options{Addr: addr})
	defer newMaster.Close()
	var valid, lost, silent int
	reasons := map[string]int{}
	for _, l := range held {
		v, err := newMaster.Get(ctx, lock.DefaultPrefix+"{"+l.Key()+"}").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("GET on new master: %v", err)
		}
		select {
		case <-l.Lost():
			lost++
			var le *lock.LostError
			if errors.As(l.LostErr(), &le) {
				reasons[le.Reason.String()]++
			}
		default:
			if v == l.Token() {
				valid++
			} else {
				silent++
				t.Errorf("%s: not reported lost, but the new master has %q, not its token", l.Key(), v)
			}
		}
	}
	for _, l := range held {
		if err := l.Release(ctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("Release(%s) error = %v", l.Key(), err)
		}
	}
	figure(t, "sentinel_failover", "ttl_ms", ttl.Milliseconds(), "holds", n, "valid", valid, "lost", lost,
		"silently_gone", silent, "reasons", fmtCounts(reasons), "failover_ms", failover.Milliseconds(),
		"acquire_resumed_after_kill_ms", resumed.Milliseconds())
}
