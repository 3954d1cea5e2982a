package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

func ExampleClient_Inspect() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	l := locks.NewLock("example:inspect", lock.WithMetadata("request 7f3a"))
	if err := l.Acquire(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)
	info, err := locks.Inspect(ctx, "example:inspect")
	if err != nil {
		fmt.Println(err)
		return
	}
	h := info.Holders[0]
	fmt.Println(info.Kind, len(info.Holders), h.Token == l.Token(), h.Fence == l.Fence(), h.Metadata)
	// Output:
	// mutex 1 true true request 7f3a
}

func ExampleClient_List() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	for _, key := range []string{"example:list:a", "example:list:b"} {
		l := locks.NewLock(key)
		if err := l.Acquire(ctx); err != nil {
			fmt.Println(err)
			return
		}
		defer l.Release(ctx)
	}
	n := 0
	for info, err := range locks.List(ctx, "example:list:*") {
		if err != nil {
			fmt.Println(err)
			return
		}
		n += len(info.Holders)
	}
	fmt.Println("holders:", n)
	// Output:
	// holders: 2
}

func ExampleClient_ForceRelease() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	l := locks.NewLock("example:force", lock.WithTTL(time.Second))
	if err := l.Acquire(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// An operator frees the key; the holder learns of it at once, or at
	// its next renewal if the message was missed.
	fmt.Println(locks.ForceRelease(ctx, "example:force"))
	<-l.Lost()
	var lost *lock.LostError
	fmt.Println(errors.As(l.LostErr(), &lost) && lost.Reason == lock.LossForceReleased)
	fmt.Println(errors.Is(locks.ForceRelease(ctx, "example:force"), lock.ErrNotHeld))
	// Output:
	// <nil>
	// true
	// true
}

func ExampleWithAudit() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb, lock.WithAudit("example:audit", 10000))
	defer locks.Close()
	ctx := context.Background()

	err := locks.WithLock(ctx, "example:audited", func(context.Context) error { return nil })
	fmt.Println("err:", err)
	entries, _ := rdb.XRange(ctx, "example:audit", "-", "+").Result()
	for _, e := range entries {
		fmt.Println(e.Values["event"], e.Values["key"])
	}
	// Output:
	// err: <nil>
	// acquired example:audited
	// released example:audited
}
