package lock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

func ExampleElection() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	// Two replicas of one scheduler; one leads at a time.
	a := locks.NewElection("example:scheduler")
	b := locks.NewElection("example:scheduler")
	fmt.Println(a.Campaign(ctx, "host-a:8080"))
	l, _ := b.Leader(ctx)
	fmt.Println(l.Value, l.Term == a.Term())

	done := make(chan error, 1)
	go func() { done <- b.Campaign(ctx, "host-b:8080") }()
	fmt.Println(a.Resign(ctx)) // b takes over at once
	fmt.Println(<-done, b.Term() > a.Term())

	fmt.Println(b.Resign(ctx))
	_, err := b.Leader(ctx)
	fmt.Println(errors.Is(err, lock.ErrNoLeader))
	// Output:
	// <nil>
	// host-a:8080 true
	// <nil>
	// <nil> true
	// <nil>
	// true
}

func ExampleElection_Lead() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	e := locks.NewElection("example:sweeper")
	err := e.Lead(ctx, "host-a", func(ctx context.Context) error {
		// Runs while leading; ctx ends (cause a *lock.LostError) if the
		// term is lost. Pass e.Term() to the store as a fencing token.
		fmt.Println("sweeping in term", e.Term() > 0)
		return nil
	})
	fmt.Println(err) // resigned when fn returned
	// Output:
	// sweeping in term true
	// <nil>
}

func ExampleElection_Observe() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	views := locks.NewElection("example:indexer").Observe(ctx)
	fmt.Printf("%q\n", (<-views).Value) // nobody leads yet

	e := locks.NewElection("example:indexer")
	_ = e.Campaign(ctx, "host-a")
	fmt.Printf("%q\n", (<-views).Value)
	_ = e.Resign(ctx)
	fmt.Println((<-views).Term) // nobody again
	// Output:
	// ""
	// "host-a"
	// 0
}
