// Fencing: a store that rejects writes carrying an older fence than it has
// seen stops a holder whose lock expired while it was paused.
//
// Run it with `go run ./examples/fencing` (an in-process Redis is started),
// or against your own server with `REDIS_ADDR=localhost:6379 go run ./examples/fencing`.
// It exits 1 if the store accepts the stale write.
//
// A lock is a lease: a holder that stalls (GC pause, swapped out, a slow
// call) past its TTL still believes it holds the lock while someone else
// does. Checking [lock.Lock.Lost] before writing narrows the gap but cannot
// close it, since the pause can fall between the check and the write. The
// fence closes it, if the store checks it in the same step as the write
// (in SQL: UPDATE … SET fence = $1 … WHERE fence <= $1).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/agentlock/lock"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// errStale is the store's answer to a write from an outdated holder.
var errStale = errors.New("store: stale fence")

// store keeps, per resource, a value and the highest fence that wrote it.
type store struct {
	mu     sync.Mutex
	fences map[string]int64
	values map[string]string
}

// Write sets resource to value unless a write with a higher fence came first.
func (s *store) Write(resource string, fence int64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seen := s.fences[resource]; fence < seen {
		return fmt.Errorf("%w: %d < %d", errStale, fence, seen)
	}
	s.fences[resource], s.values[resource] = fence, value
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fencing:", err)
		os.Exit(1)
	}
}

func run() error {
	var m *miniredis.Miniredis
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		var err error
		if m, err = miniredis.Run(); err != nil {
			return err
		}
		defer m.Close()
		addr = m.Addr()
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()
	db := &store{fences: map[string]int64{}, values: map[string]string{}}
	const key, ttl = "report:daily", 300 * time.Millisecond

	// A takes the lock, without renewal so that a pause can outlast it.
	a := locks.NewLock(key, lock.WithTTL(ttl), lock.WithWatchdog(false))
	if err := a.Acquire(ctx); err != nil {
		return err
	}
	fmt.Printf("A acquired %q with fence %d, then stalled past its %v TTL\n", key, a.Fence(), ttl)
	if m != nil {
		m.FastForward(ttl) // the in-process Redis's clock moves only when told
	} else {
		time.Sleep(ttl + 100*time.Millisecond)
	}

	// B gets the expired lock and writes.
	b := locks.NewLock(key, lock.WithWaitTimeout(5*time.Second))
	if err := b.Acquire(ctx); err != nil {
		return err
	}
	defer b.Release(context.WithoutCancel(ctx))
	if err := db.Write(key, b.Fence(), "B's report"); err != nil {
		return fmt.Errorf("write of B: %w", err)
	}
	fmt.Printf("B acquired it with fence %d and wrote: accepted\n", b.Fence())

	// A wakes up, unaware, and writes with its old fence.
	err := db.Write(key, a.Fence(), "A's report")
	if !errors.Is(err, errStale) {
		return fmt.Errorf("stale write of A with fence %d was accepted (err = %v)", a.Fence(), err)
	}
	fmt.Printf("A woke up and wrote with fence %d: rejected (%v)\n", a.Fence(), err)
	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		return fmt.Errorf("release of A: %v, want ErrNotHeld", err)
	}
	fmt.Printf("A's release: not held; the store keeps %q\n", db.values[key])
	return nil
}
