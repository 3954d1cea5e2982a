package lock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

func ExampleClient_Once() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()
	key := "example:rag:answer:42"

	build := func(ctx context.Context) ([]byte, error) {
		fmt.Println("running the pipeline")
		return []byte("the answer"), nil
	}
	// The first caller anywhere runs build; the others, in any process,
	// wait for it and get what it stored.
	v, shared, err := locks.Once(ctx, key, build)
	fmt.Printf("%s shared=%v err=%v\n", v, shared, err)
	v, shared, err = locks.Once(ctx, key, build)
	fmt.Printf("%s shared=%v err=%v\n", v, shared, err)

	// Forget drops the stored result: the next call runs build again.
	fmt.Println(locks.Forget(ctx, key))
	_, shared, _ = locks.Once(ctx, key, build)
	fmt.Println("shared:", shared)

	// A failure is not stored: the next caller runs fn again.
	errModel := errors.New("model unavailable")
	_, _, err = locks.Once(ctx, key+":fail", func(context.Context) ([]byte, error) { return nil, errModel })
	fmt.Println(errors.Is(err, errModel))
	// Output:
	// running the pipeline
	// the answer shared=false err=<nil>
	// the answer shared=true err=<nil>
	// <nil>
	// running the pipeline
	// shared: false
	// true
}

func ExampleOnceValue() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	type receipt struct {
		ID    string
		Cents int64
	}
	// A payment tool call retried by the agent charges once: every retry
	// with the same call id gets the first one's receipt.
	pay := func(ctx context.Context) (receipt, error) {
		fmt.Println("charging")
		return receipt{ID: "ch_1", Cents: 4200}, nil
	}
	for range 2 {
		r, shared, err := lock.OnceValue(ctx, locks, "example:toolcall:pay:call_7f3a", pay)
		fmt.Println(r.ID, r.Cents, shared, err)
	}
	// Output:
	// charging
	// ch_1 4200 false <nil>
	// ch_1 4200 true <nil>
}
