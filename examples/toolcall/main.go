// Toolcall: 100 concurrent retries of one payment tool call charge the
// customer once, and every retry gets the same receipt (lock.OnceValue:
// the receipt is stored with the lock's release, only while the lock is
// still the caller's).
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

const retries = 100

// provider stands in for a payment API: every Charge moves money. A real
// one takes an idempotency key; pass the call's key (or lock.OnceFence(ctx))
// so that a charge made by a caller whose lock was lost is not made twice.
type provider struct{ charges atomic.Int64 }

// Receipt is what the tool returns to the agent.
type Receipt struct {
	ID    string `json:"id"`
	User  string `json:"user"`
	Cents int64  `json:"cents"`
}

func (p *provider) Charge(ctx context.Context, idempotencyKey, user string, cents int64) (Receipt, error) {
	n := p.charges.Add(1)
	select {
	case <-time.After(30 * time.Millisecond): // the API call
	case <-ctx.Done():
		return Receipt{}, context.Cause(ctx)
	}
	return Receipt{ID: fmt.Sprintf("ch_%04d", n), User: user, Cents: cents}, nil
}

// pay is the tool. However often the agent retries one call, identified by
// callID, it charges at most once and returns the same receipt every time,
// for a day.
func pay(ctx context.Context, locks *lock.Client, p *provider, user, callID string, cents int64) (Receipt, error) {
	key := "toolcall:" + user + ":pay:" + callID
	r, _, err := lock.OnceValue(ctx, locks, key, func(ctx context.Context) (Receipt, error) {
		return p.Charge(ctx, key, user, cents)
	}, lock.WithResultTTL(24*time.Hour), lock.WithTTL(60*time.Second), lock.WithWaitTimeout(30*time.Second))
	return r, err
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
	ctx := context.Background()
	// Four replicas of the agent's tool runner, each with its own Client.
	var clients []*lock.Client
	for range 4 {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		locks := lock.NewClient(rdb)
		defer locks.Close()
		clients = append(clients, locks)
	}

	user, callID := "user-42", "call_7f3a"
	// Start with the call not yet made, so that reruns against your own Redis show the same.
	if err := clients[0].Forget(ctx, "toolcall:"+user+":pay:"+callID); err != nil {
		return err
	}
	var (
		p        provider
		wg       sync.WaitGroup
		receipts = make([]Receipt, retries)
		errs     = make([]error, retries)
	)
	start := time.Now()
	for i := range retries {
		wg.Go(func() { receipts[i], errs[i] = pay(ctx, clients[i%len(clients)], &p, user, callID, 4200) })
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
	fmt.Printf("%d concurrent retries of pay(%s, %s) over %d replicas: %d charge(s), %d/%d got receipt %+v (%v)\n",
		retries, user, callID, len(clients), p.charges.Load(), same, retries, receipts[0], time.Since(start).Round(time.Millisecond))
	if p.charges.Load() != 1 || same != retries {
		return errors.New("want exactly one charge and one receipt for every retry")
	}
	return nil
}
