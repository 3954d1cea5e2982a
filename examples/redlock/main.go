// Command redlock shows a quorum lock over five independent Redis nodes.
//
// Run it with `go run ./examples/redlock`: it starts five in-process
// miniredis nodes. To use real servers, list them comma-separated in
// REDIS_ADDR, the variable every example reads (an odd number, at least 3):
// `REDIS_ADDR=host1:6379,host2:6379,host3:6379 go run ./examples/redlock`.
// It exits non-zero on failure.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/redlock"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	addrs, stop, err := nodes()
	if err != nil {
		return err
	}
	defer stop()
	var rdbs []redis.UniversalClient
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, ContextTimeoutEnabled: true})
		defer rdb.Close()
		rdbs = append(rdbs, rdb)
	}
	locks := redlock.New(rdbs, redlock.WithTTL(10*time.Second))
	defer locks.Close()

	// The explicit form: acquire, use the fence downstream, release.
	l := locks.NewLock("report:daily")
	if err := l.Acquire(ctx); err != nil {
		return err
	}
	fmt.Printf("held on a quorum of %d nodes: fence %d, valid for %v\n", len(rdbs), l.Fence(), l.Validity().Round(time.Millisecond))
	if err := l.Release(ctx); err != nil {
		return err
	}

	// Four workers, one at a time in the critical section.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		inside  int
		overlap bool
		errs    = make(chan error, 4)
	)
	for w := range 4 {
		wg.Go(func() {
			errs <- locks.WithLock(ctx, "session:42", func(ctx context.Context) error {
				mu.Lock()
				inside++
				overlap = overlap || inside > 1
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				mu.Lock()
				inside--
				mu.Unlock()
				fmt.Printf("worker %d done\n", w)
				return nil
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	if overlap {
		return errors.New("two workers held the lock at once")
	}

	// A second holder is turned away while the first holds the lock.
	a, b := locks.NewLock("tool:pay"), locks.NewLock("tool:pay")
	if err := a.Acquire(ctx); err != nil {
		return err
	}
	ok, err := b.TryAcquire(ctx)
	if err != nil || ok {
		return fmt.Errorf("second TryAcquire = %v, %v; want false, nil", ok, err)
	}
	if err := a.Release(ctx); err != nil {
		return err
	}
	if err := b.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		return fmt.Errorf("release of a lock never held = %v, want ErrNotHeld", err)
	}
	fmt.Println("ok")
	return nil
}

// nodes returns the addresses to use and a function that stops any
// in-process servers.
func nodes() ([]string, func(), error) {
	if env := os.Getenv("REDIS_ADDR"); env != "" {
		return strings.Split(env, ","), func() {}, nil
	}
	var ms []*miniredis.Miniredis
	stop := func() {
		for _, m := range ms {
			m.Close()
		}
	}
	var addrs []string
	for range 5 {
		m, err := miniredis.Run()
		if err != nil {
			stop()
			return nil, nil, err
		}
		ms = append(ms, m)
		addrs = append(addrs, m.Addr())
	}
	return addrs, stop, nil
}
