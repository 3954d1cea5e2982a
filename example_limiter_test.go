package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentlock/lock"
	"github.com/redis/go-redis/v9"
)

func ExampleClient_NewLimiter() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	// 90,000 tokens and 500 requests a minute for one API key, shared by
	// every replica; the keys share the hash tag "openai" for Cluster.
	tpm := locks.NewLimiter("openai}:tpm", lock.Rate{N: 90_000, Per: time.Minute})
	rpm := locks.NewLimiter("openai}:rpm", lock.Rate{N: 500, Per: time.Minute})
	// Reserve the request and its estimated tokens together, wait until
	// both are due, call the model, then settle with the real count.
	rs, err := lock.WaitAll(ctx, lock.Take{L: rpm, N: 1}, lock.Take{L: tpm, N: 4_000})
	if err != nil {
		fmt.Println(err)
		return
	}
	used := int64(1_250) // what the provider reported
	fmt.Println(rs[1].Settle(ctx, used))
	left, err := tpm.Available(ctx) // 90,000 - 4,000 + 2,750, and refilling
	fmt.Println("tokens back:", left >= 88_750, err)

	_, _, err = tpm.Allow(ctx, 100_000) // more than a burst: never possible
	fmt.Println(errors.Is(err, lock.ErrInvalid))
	// Output:
	// <nil>
	// tokens back: true <nil>
	// true
}

func ExampleLimiter_Reserve() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	lim := locks.NewLimiter("example:reports", lock.Rate{N: 2, Per: time.Hour})
	a, _ := lim.Reserve(ctx, 2) // the whole burst, due now
	b, _ := lim.Reserve(ctx, 1) // due when the rate has paid for it
	fmt.Println(a.Delay(), b.Delay() > 29*time.Minute)
	fmt.Println(a.Cancel(ctx)) // gives a's units back: b moves up
	ok, _, _ := lim.Allow(ctx, 1)
	fmt.Println("allowed:", ok)
	// Output:
	// 0s true
	// <nil>
	// allowed: true
}
