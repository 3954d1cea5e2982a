package main

// The snippets of docs/migrating.md, compiled and run against a real
// redis-server: each pair does the same job with the other library and with
// agentlock. TestMigratingSnippets checks that every Go block of
// docs/migrating.md is copied verbatim from this file, so the guide cannot drift
// from code that builds.

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
	"github.com/agentlock/lock/redlock"
)

// runs counts the critical sections the snippets ran.
var runs atomic.Int64

func work(ctx context.Context) error { runs.Add(1); return ctx.Err() }

// --- bsm/redislock: one attempt ---

func bsmTry(ctx context.Context, rdb *redis.Client) error {
	locker := redislock.New(rdb)
	l, err := locker.Obtain(ctx, "job:42", 30*time.Second, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		return nil // someone else has it
	} else if err != nil {
		return err
	}
	defer l.Release(ctx)
	return work(ctx)
}

func agentlockTry(ctx context.Context, locks *lock.Client) error {
	l := locks.NewLock("job:42", lock.WithTTL(30*time.Second))
	ok, err := l.TryAcquire(ctx)
	if err != nil || !ok {
		return err // ok == false: someone else has it
	}
	defer l.Release(context.WithoutCancel(ctx))
	return work(ctx)
}

// --- bsm/redislock: waiting with a retry strategy ---

func bsmWait(ctx context.Context, rdb *redis.Client) error {
	retry := redislock.LimitRetry(redislock.ExponentialBackoff(10*time.Millisecond, time.Second), 20)
	l, err := redislock.Obtain(ctx, rdb, "job:42", 30*time.Second, &redislock.Options{RetryStrategy: retry})
	if err != nil {
		return err // redislock.ErrNotObtained after 20 retries
	}
	defer l.Release(ctx)
	return work(ctx)
}

func agentlockWait(ctx context.Context, locks *lock.Client) error {
	return locks.WithLock(ctx, "job:42", work,
		lock.WithTTL(30*time.Second),
		lock.WithWaitTimeout(10*time.Second), // then lock.ErrNotAcquired
		lock.WithBackoff(10*time.Millisecond, time.Second))
}

// --- bsm/redislock: Refresh, TTL, Release ---

func bsmRefresh(ctx context.Context, l *redislock.Lock) error {
	if err := l.Refresh(ctx, time.Minute, nil); errors.Is(err, redislock.ErrNotObtained) {
		return err // no longer ours
	}
	left, err := l.TTL(ctx) // 0, nil once the lock is gone
	if err != nil || left == 0 {
		return errors.New("lock gone")
	}
	if err := l.Release(ctx); errors.Is(err, redislock.ErrLockNotHeld) {
		return err
	}
	return nil
}

func agentlockRefresh(ctx context.Context, l *lock.Lock) error {
	// Usually nothing to do: the watchdog renews a held lock every TTL/3.
	if err := l.Extend(ctx, time.Minute); errors.Is(err, lock.ErrNotHeld) {
		return err // no longer ours
	}
	if _, err := l.TTL(ctx); err != nil {
		return err // wraps lock.ErrNotHeld once the lock is gone
	}
	if err := l.Release(ctx); errors.Is(err, lock.ErrNotHeld) {
		return err
	}
	return nil
}

// --- go-redsync: one node ---

func redsyncLock(ctx context.Context, rdb *redis.Client) error {
	rs := redsync.New(goredis.NewPool(rdb))
	m := rs.NewMutex("job:42", redsync.WithExpiry(8*time.Second), redsync.WithTries(32))
	if err := m.LockContext(ctx); err != nil {
		return err // redsync.ErrFailed or *redsync.ErrTaken after 32 tries
	}
	defer m.UnlockContext(ctx)
	if ok, err := m.ExtendContext(ctx); !ok {
		return err // extension failed: the lock may be gone
	}
	return work(ctx)
}

func agentlockLock(ctx context.Context, locks *lock.Client) error {
	l := locks.NewLock("job:42", lock.WithTTL(8*time.Second), lock.WithWaitTimeout(5*time.Second))
	if err := l.Acquire(ctx); err != nil {
		return err // lock.ErrNotAcquired after the wait
	}
	defer l.Release(context.WithoutCancel(ctx))
	// No Extend needed: the watchdog renews; l.Lost() closes if it cannot.
	select {
	case <-l.Lost():
		return l.LostErr()
	default:
	}
	return work(ctx)
}

// --- go-redsync: a quorum of independent nodes ---

func redsyncQuorum(ctx context.Context, nodes []*redis.Client) error {
	pools := make([]redsyncredis.Pool, len(nodes))
	for i, rdb := range nodes {
		pools[i] = goredis.NewPool(rdb)
	}
	m := redsync.New(pools...).NewMutex("job:42", redsync.WithExpiry(8*time.Second))
	if err := m.TryLockContext(ctx); err != nil {
		return nil // taken, or no quorum
	}
	defer m.UnlockContext(ctx)
	if time.Until(m.Until()) < time.Second {
		return errors.New("too little validity left")
	}
	return work(ctx)
}

func agentlockQuorum(ctx context.Context, nodes []redis.UniversalClient) error {
	rl := redlock.New(nodes, redlock.WithTTL(8*time.Second))
	defer rl.Close()
	l := rl.NewLock("job:42")
	ok, err := l.TryAcquire(ctx)
	if err != nil || !ok {
		return err // ok == false: taken
	}
	defer l.Release(context.WithoutCancel(ctx))
	if l.Validity() < time.Second {
		return errors.New("too little validity left")
	}
	return work(ctx)
}

// TestMigratingSnippets runs every pair on a real redis-server (three for
// the quorum pair) and checks each ran its critical section.
func TestMigratingSnippets(t *testing.T) {
	var nodes []*redis.Client
	for range 3 {
		nodes = append(nodes, redistest.Start(t, redistest.Config{}).Client(t))
	}
	rdb := nodes[0]
	ctx := context.Background()
	locks := lock.NewClient(rdb)
	defer locks.Close()

	bl, err := redislock.Obtain(ctx, rdb, "job:refresh:bsm", time.Second, nil)
	if err != nil {
		t.Fatalf("Obtain() error = %v", err)
	}
	al := locks.NewLock("job:refresh:agentlock", lock.WithTTL(time.Second))
	if err := al.Acquire(ctx); err != nil {
		t.Fatalf("Acquire() error = %v", err)
	}
	universal := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		universal[i] = n
	}
	steps := []struct {
		name string
		run  func() error
		runs int64 // critical sections it runs
	}{
		{"bsmTry", func() error { return bsmTry(ctx, rdb) }, 1},
		{"agentlockTry", func() error { return agentlockTry(ctx, locks) }, 1},
		{"bsmWait", func() error { return bsmWait(ctx, rdb) }, 1},
		{"agentlockWait", func() error { return agentlockWait(ctx, locks) }, 1},
		{"bsmRefresh", func() error { return bsmRefresh(ctx, bl) }, 0},
		{"agentlockRefresh", func() error { return agentlockRefresh(ctx, al) }, 0},
		{"redsyncLock", func() error { return redsyncLock(ctx, rdb) }, 1},
		{"agentlockLock", func() error { return agentlockLock(ctx, locks) }, 1},
		{"redsyncQuorum", func() error { return redsyncQuorum(ctx, nodes) }, 1},
		{"agentlockQuorum", func() error { return agentlockQuorum(ctx, universal) }, 1},
	}
	for _, s := range steps {
		before := runs.Load()
		if err := s.run(); err != nil {
			t.Errorf("%s() error = %v", s.name, err)
		}
		if got := runs.Load() - before; got != s.runs {
			t.Errorf("%s() ran %d critical sections, want %d", s.name, got, s.runs)
		}
	}
}

// TestMigratingSnippetsMatch: every ```go block of docs/migrating.md is a part
// of this file, character for character.
func TestMigratingSnippetsMatch(t *testing.T) {
	guide, err := os.ReadFile("../docs/migrating.md")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("migrate_test.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(guide, -1)
	if len(blocks) < 10 {
		t.Fatalf("docs/migrating.md has %d Go blocks, want every snippet of this file (10)", len(blocks))
	}
	for _, b := range blocks {
		if !strings.Contains(string(self), string(b[1])) {
			t.Errorf("docs/migrating.md block not found in migrate_test.go:\n%s", b[1])
		}
	}
}
