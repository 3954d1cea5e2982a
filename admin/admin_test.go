package admin_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/admin"
	"github.com/agentlock/lock/internal/redistest"
)

func ExampleAdmin_ForceReleaseToken() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.NewClient(rdb, lock.WithNotify(false))
	defer locks.Close()
	ctx := context.Background()

	sem := locks.NewSemaphore("example:quota", 2)
	a, b := sem.Permit(), sem.Permit()
	for _, p := range []*lock.Lock{a, b} {
		if err := p.Acquire(ctx); err != nil {
			fmt.Println(err)
			return
		}
	}
	defer b.Release(ctx)
	ops := admin.New(rdb, admin.WithPrefix(lock.DefaultPrefix))
	if err := ops.ForceReleaseToken(ctx, "example:quota", a.Token()); err != nil {
		fmt.Println(err)
		return
	}
	info, err := ops.Inspect(ctx, "example:quota")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(info.Kind, len(info.Holders), info.Holders[0].Token == b.Token())
	err = ops.ForceReleaseToken(ctx, "example:quota", a.Token())
	fmt.Println(errors.Is(err, lock.ErrNotHeld))
	// Output:
	// semaphore 1 true
	// true
}

// TestAdmin_verbs: an Admin over a real Redis sees and frees the holds a
// lock Client took under its prefix, and its errors match the root's
// sentinels.
func TestAdmin_verbs(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	ctx := context.Background()
	c := lock.NewClient(rdb, lock.WithPrefix("p:"), lock.WithTTL(time.Minute), lock.WithMetadata("m"))
	defer c.Close()
	l := c.NewLock("job:1", lock.WithOwner("w1"))
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	a := admin.New(rdb, admin.WithPrefix("p:"), admin.WithAudit("p:audit", 100))
	info, err := a.Inspect(ctx, "job:1")
	if err != nil || info.Kind != "mutex" || len(info.Holders) != 1 || info.Holders[0].Owner != "w1" || info.Holders[0].Metadata != "m" {
		t.Fatalf("Inspect: %+v, %v", info, err)
	}
	n := 0
	for info, err := range a.List(ctx, "job:*") {
		if err != nil || info.Key != "job:1" {
			t.Errorf("List: %+v, %v", info, err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("List yielded %d locks, want 1", n)
	}
	if err := a.ForceReleaseToken(ctx, "job:1", ""); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("ForceReleaseToken(empty): %v, want ErrInvalid", err)
	}
	if _, err := a.Inspect(ctx, ""); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("Inspect(empty): %v, want ErrInvalid", err)
	}
	if err := a.ForceRelease(ctx, "job:1"); err != nil {
		t.Fatalf("ForceRelease: %v", err)
	}
	if err := a.ForceRelease(ctx, "job:1"); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("ForceRelease of a free key: %v, want ErrNotHeld", err)
	}
	if xs, err := rdb.XRange(ctx, "p:audit", "-", "+").Result(); err != nil || len(xs) != 1 || xs[0].Values["event"] != "force-released" {
		t.Errorf("audit stream: %v, %v; want one force-released entry", xs, err)
	}
}
