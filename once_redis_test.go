package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
)

// storeHolder keeps every once_store.lua call from being sent until open is
// closed, then fails it unsent: the store never lands.
type storeHolder struct {
	scriptCounter
	entered   chan struct{}
	enterOnce sync.Once
	open      chan struct{}
}

func newStoreHolder() *storeHolder {
	return &storeHolder{
		scriptCounter: scriptCounter{script: luascripts.OnceStore, src: luascripts.OnceStoreSrc},
		entered:       make(chan struct{}), open: make(chan struct{}),
	}
}

func (s *storeHolder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !s.is(cmd) {
			return next(ctx, cmd)
		}
		s.n.Add(1)
		s.enterOnce.Do(func() { close(s.entered) })
		<-s.open
		err := errors.New("store refused by the test, not sent")
		cmd.SetErr(err)
		return err
	}
}

// TestOnce_storeOutAtDeadlineNotShared: the leader's ctx ends while its
// store is out (held by a hook, then failed unsent). The leader returns
// fn's value by its deadline; a follower of the same Client must not be
// handed that value as a stored one (shared true) when Redis never kept
// it: it goes to Redis itself and, the store failed, runs fn there.
func TestOnce_storeOutAtDeadlineNotShared(t *testing.T) {
	tg := realTarget(t)
	key := keyFor(t)
	rdb := tg.newRDB(t)
	h := newStoreHolder()
	rdb.AddHook(h)
	c := newClient(t, rdb, lock.WithCoalescing(false), lock.WithLogger(nil))
	t.Cleanup(func() {
		select {
		case <-h.open:
		default:
			close(h.open)
		}
	})
	ttl := lock.WithTTL(time.Second)
	lctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	leader := make(chan error, 1)
	go func() {
		v, shared, err := c.Once(lctx, key, func(context.Context) ([]byte, error) {
			if !waitFor(10*time.Second, func() bool { return lock.OnceFollowers(c, key) == 1 }) {
				return nil, errors.New("the follower never joined")
			}
			return []byte("first"), nil
		}, ttl)
		if err == nil && (shared || string(v) != "first") {
			err = errors.New("leader got " + string(v))
		}
		leader <- err
	}()
	type res struct {
		v      []byte
		shared bool
		err    error
	}
	if !waitFor(10*time.Second, func() bool { return lock.OnceFollowers(c, key) == 0 }) {
		t.Fatal("the leader's call is not under way")
	}
	follower := make(chan res, 1)
	go func() {
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		v, shared, err := c.Once(fctx, key, func(context.Context) ([]byte, error) { return []byte("second"), nil }, ttl)
		follower <- res{v, shared, err}
	}()
	waitClosed(t, h.entered, 10*time.Second, "the leader's store")
	must(t, "leader's Once()", <-leader)
	close(h.open) // every store now fails unsent
	r := <-follower
	if r.err == nil && r.shared {
		stored, _ := tg.rdb.Get(context.Background(), resultKey(key)).Result()
		t.Fatalf("follower's Once() = %q, shared true, nil; Redis holds %q: a store whose outcome was unknown was shared", r.v, stored)
	}
}
