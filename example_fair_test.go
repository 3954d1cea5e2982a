package lock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

func ExampleWithFair() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb, lock.WithFair(true))
	defer locks.Close()
	ctx := context.Background()

	first := locks.NewLock("example:fair")
	if err := first.Acquire(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// A waiter joins the queue in Redis; the release hands it the key.
	next := locks.NewLock("example:fair")
	done := make(chan error, 1)
	go func() { done <- next.Acquire(ctx) }()
	for n := 0; n != 1; n, _ = first.Waiters(ctx) { // wait until it has queued
		time.Sleep(time.Millisecond)
	}
	fmt.Println("release:", first.Release(ctx))
	fmt.Println("next in line:", <-done, next.Fence() > first.Fence())
	fmt.Println("release:", next.Release(ctx))
	// Output:
	// release: <nil>
	// next in line: <nil> true
	// release: <nil>
}

func ExampleClient_WithMultiLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	// Both accounts or neither; any order of keys is the same lock.
	err := locks.WithMultiLock(ctx, []string{"acct:2", "acct:1"}, func(ctx context.Context) error {
		fmt.Println("moving value between acct:1 and acct:2")
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// moving value between acct:1 and acct:2
	// err: <nil>
}

func ExampleClient_NewMultiLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	m := locks.NewMultiLock([]string{"order:9", "stock:7"})
	if err := m.Acquire(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// Keys come in the order they are taken: by cluster slot, then by key.
	fmt.Println(m.Keys(), m.Fence("order:9") > 0, m.Fence("stock:7") > 0)
	// A plain lock on a member key is excluded while the MultiLock holds it.
	ok, err := locks.NewLock("stock:7").TryAcquire(ctx)
	fmt.Println(ok, err)
	fmt.Println("release:", m.Release(ctx))
	// Output:
	// [stock:7 order:9] true true
	// false <nil>
	// release: <nil>
}
