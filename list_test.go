package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/agentlock/lock"
)

// TestClient_List: List finds every lock matching the pattern, of every
// hold shape, and none of their companions (fence counters, holder info)
// nor other keys; a prefix with glob characters matches itself only.
func TestClient_List(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		for _, prefix := range []string{lock.DefaultPrefix, "l*ck?:"} {
			c := newClient(t, tg.rdb, lock.WithPrefix(prefix))
			rc := newClient(t, tg.rdb, lock.WithPrefix(prefix), lock.WithOwner("o"))
			other := newClient(t, tg.rdb, lock.WithPrefix("x"+prefix))
			var want []string
			for i := range 30 {
				key := fmt.Sprintf("sess:%d", i)
				cl := c
				if i%3 == 0 {
					cl = rc
				}
				must(t, "Acquire()", cl.NewLock(key).Acquire(ctx))
				want = append(want, key)
				must(t, "Acquire() other", c.NewLock(fmt.Sprintf("job:%d", i)).Acquire(ctx))
				must(t, "Acquire() other prefix", other.NewLock(key).Acquire(ctx))
			}
			var got []string
			for info, err := range c.List(ctx, "sess:*") {
				must(t, "List()", err)
				if info.Kind != "mutex" || len(info.Holders) != 1 {
					t.Fatalf("List() item %+v, want a held mutex", info)
				}
				got = append(got, info.Key)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("prefix %q: List(sess:*) = %v, want %v", prefix, got, want)
			}
			n := 0
			for range c.List(ctx, "") {
				n++
			}
			if n != 60 {
				t.Fatalf("prefix %q: List(\"\") found %d locks, want 60", prefix, n)
			}
			for range c.List(ctx, "*") {
				break // stopping the range stops List
			}
		}
		var zero lock.Client
		errs := 0
		for _, err := range zero.List(ctx, "*") {
			if errs++; !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("zero Client List() error = %v, want ErrInvalid", err)
			}
		}
		if errs != 1 {
			t.Fatalf("zero Client List() yielded %d errors, want 1", errs)
		}
	})
}
