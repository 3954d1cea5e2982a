package lock_test

import (
	"context"
	"fmt"

	"github.com/agentlock/lock"
	"github.com/redis/go-redis/v9"
)

func ExampleClient_NewRWLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	rw := locks.NewRWLock("example:index:tenant-1")
	r1, r2 := rw.ReadLock(), rw.ReadLock() // a new handle per reader
	ok1, _ := r1.TryAcquire(ctx)
	ok2, _ := r2.TryAcquire(ctx)
	fmt.Println("two readers:", ok1, ok2)

	w := rw.WriteLock()
	ok, _ := w.TryAcquire(ctx)
	fmt.Println("writer beside readers:", ok)

	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	ok, _ = w.TryAcquire(ctx)
	fmt.Println("writer alone:", ok, w.Fence() > 0)
	_ = w.Release(ctx)
	// Output:
	// two readers: true true
	// writer beside readers: false
	// writer alone: true true
}

func ExampleRWLock_WithReadLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	rw := locks.NewRWLock("example:index:tenant-2")
	err := rw.WithReadLock(ctx, func(ctx context.Context) error {
		// Other readers may be here too; no writer is.
		fmt.Println("searching the index")
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// searching the index
	// err: <nil>
}

func ExampleRWLock_WithWriteLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	rw := locks.NewRWLock("example:index:tenant-3")
	err := rw.WithWriteLock(ctx, func(ctx context.Context) error {
		// Alone: no reader, no other writer. ctx ends, cause
		// lock.ErrLockLost, if the hold is lost.
		fmt.Println("rebuilding the index")
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// rebuilding the index
	// err: <nil>
}

func ExampleRWLock_ReadLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	rw := locks.NewRWLock("example:index:tenant-4")
	r := rw.ReadLock()
	if err := r.Acquire(ctx); err != nil {
		fmt.Println("acquire:", err)
		return
	}
	// A read hold is a *Lock: renewed, lost and released like a mutex's.
	fmt.Println("reading at fence", r.Fence() > 0)
	fmt.Println("release:", r.Release(ctx))
	// Output:
	// reading at fence true
	// release: <nil>
}

func ExampleRWLock_WriteLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	rw := locks.NewRWLock("example:index:tenant-5")
	w := rw.WriteLock()
	if err := w.Acquire(ctx); err != nil {
		fmt.Println("acquire:", err)
		return
	}
	fence := w.Fence() // pass it to the store the writer writes to
	_ = w.Release(ctx)

	r := rw.ReadLock()
	_ = r.Acquire(ctx)
	fmt.Println("reader sees the writer's fence:", r.Fence() == fence)
	_ = r.Release(ctx)
	// Output:
	// reader sees the writer's fence: true
}
