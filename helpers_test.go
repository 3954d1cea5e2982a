package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/redistest"
)

// target is one Redis a behaviour test runs against: an in-process
// miniredis, or a real redis-server started for the test.
type target struct {
	name string
	mr   *miniredis.Miniredis // nil on a real server
	srv  *redistest.Server    // nil on miniredis
	rdb  *redis.Client
}

// eachTarget runs fn as a subtest on miniredis and on a real redis-server.
// The real one skips when redis-server is missing, unless
// LOCK_REQUIRE_REDIS=1 makes it fail.
func eachTarget(t *testing.T, fn func(t *testing.T, tg *target)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) {
		fn(t, miniTarget(t))
	})
	t.Run("redis", func(t *testing.T) {
		fn(t, realTarget(t))
	})
}

func miniTarget(t *testing.T) *target {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return &target{name: "miniredis", mr: m, rdb: rdb}
}

func realTarget(t *testing.T) *target {
	t.Helper()
	s := redistest.Start(t, redistest.Config{})
	return &target{name: "redis", srv: s, rdb: s.Client(t)}
}

// newClient returns a lock Client over rdb, closed when the test ends.
func newClient(t *testing.T, rdb redis.UniversalClient, opts ...lock.Option) *lock.Client {
	t.Helper()
	c := lock.NewClient(rdb, opts...)
	t.Cleanup(func() { c.Close() })
	return c
}

// newRDB returns one more go-redis client to the target, closed at cleanup.
func (tg *target) newRDB(t *testing.T) *redis.Client {
	t.Helper()
	var rdb *redis.Client
	if tg.mr != nil {
		rdb = redis.NewClient(&redis.Options{Addr: tg.mr.Addr()})
	} else {
		rdb = tg.srv.NewClient()
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// expire makes Redis forget the lock's key as a TTL would.
func (tg *target) expire(t *testing.T, key string) {
	t.Helper()
	if err := tg.rdb.Del(context.Background(), lockKey(key)).Err(); err != nil {
		t.Fatalf("DEL %s: %v", lockKey(key), err)
	}
}

// keyFor derives a key from the test's name so parallel tests never share one.
func keyFor(t *testing.T) string {
	return strings.ReplaceAll(t.Name(), "/", ":")
}

// lockKey is the Redis key of a lock with the default prefix.
func lockKey(key string) string { return "lock:{" + key + "}" }

// waitClosed fails the test unless ch closes within d.
func waitClosed(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not closed within %v", what, d)
	}
}

// isClosed reports whether ch is closed now.
var isClosed = kindtest.IsClosed

func wantErr(t *testing.T, call string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s error = %v, want %v", call, err, want)
	}
}

func must(t *testing.T, call string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s error = %v, want nil", call, err)
	}
}
