// Toolcall: 20 concurrent retries of one payment tool call charge the
// customer once (a lock per call, plus a completion marker).
//
// Run it with `go run ./examples/toolcall` (an in-process Redis is started),
// or against your own server with `REDIS_ADDR=localhost:6379 go run ./examples/toolcall`.
// It exits 1 unless exactly one charge was made and every retry got its receipt.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentlock/lock"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

const retries = 20

// provider stands in for a payment API: every Charge moves money.
type provider struct{ charges atomic.Int64 }

func (p *provider) Charge(ctx context.Context, user string, cents int64) (receipt string, err error) {
	n := p.charges.Add(1)
	time.Sleep(30 * time.Millisecond) // the API call
	return fmt.Sprintf("ch_%04d: %s paid $%d.%02d", n, user, cents/100, cents%100), nil
}

// pay is the tool. However often the agent retries one call, identified by
// callID, it charges at most once and returns the same receipt every time.
func pay(ctx context.Context, rdb *redis.Client, locks *lock.Client, p *provider, user, callID string, cents int64) (receipt string, err error) {
	key := "toolcall:" + user + ":pay:" + callID
	l := locks.NewLock(key, lock.WithWaitTimeout(30*time.Second))
	if err := l.Acquire(ctx); err != nil {
		return "", err
	}
	defer func() {
		if rerr := l.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = rerr
		}
	}()

	done := key + ":done" // the completion marker, holding the receipt
	receipt, err = rdb.Get(ctx, done).Result()
	if err == nil || !errors.Is(err, redis.Nil) {
		return receipt, err // done by an earlier try, or a Redis failure
	}
	// Pass callID to the provider as its idempotency key too, if it has one.
	if receipt, err = p.Charge(ctx, user, cents); err != nil {
		return "", err
	}
	// Mark the call done before the lock goes, so that no retry charges again.
	return receipt, rdb.Set(ctx, done, receipt, 24*time.Hour).Err()
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "toolcall:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		m, err := miniredis.Run()
		if err != nil {
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

	user, callID := "user-42", "call_7f3a"
	// Start with the call not yet made, so that reruns against your own Redis show the same.
	if err := rdb.Del(ctx, "toolcall:"+user+":pay:"+callID+":done").Err(); err != nil {
		return err
	}
	var (
		p        provider
		wg       sync.WaitGroup
		receipts = make([]string, retries)
		errs     = make([]error, retries)
	)
	start := time.Now()
	for i := range retries {
		wg.Go(func() { receipts[i], errs[i] = pay(ctx, rdb, locks, &p, user, callID, 4200) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	same := 0
	for _, r := range receipts {
		if r == receipts[0] {
			same++
		}
	}
	fmt.Printf("%d concurrent retries of pay(%s, %s): %d charge(s), %d/%d got receipt %q (%v)\n",
		retries, user, callID, p.charges.Load(), same, retries, receipts[0], time.Since(start).Round(time.Millisecond))
	if p.charges.Load() != 1 || same != retries {
		return errors.New("want exactly one charge and one receipt for every retry")
	}
	return nil
}
