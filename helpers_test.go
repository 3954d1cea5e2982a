package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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

// keyFor derives a key from the test's name so parallel tests never share
// one. A test run again in the same process (-count) gets the name with a
// run number, so it meets no key of its earlier run on the shared cluster.
func keyFor(t *testing.T) string {
	key := strings.ReplaceAll(t.Name(), "/", ":")
	keyRuns.Lock()
	defer keyRuns.Unlock()
	if k, ok := keyRuns.byTest[t]; ok {
		return k
	}
	if keyRuns.byTest == nil {
		keyRuns.byTest, keyRuns.runs = map[*testing.T]string{}, map[string]int{}
	}
	if n := keyRuns.runs[key]; n > 0 {
		keyRuns.runs[key]++
		key = fmt.Sprintf("%s:run%d", key, n+1)
	} else {
		keyRuns.runs[key] = 1
	}
	keyRuns.byTest[t] = key
	return key
}

// keyRuns is keyFor's memory: each test's key, and how many tests of each
// name have asked for one.
var keyRuns struct {
	sync.Mutex
	byTest map[*testing.T]string
	runs   map[string]int
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

// takeOver has a lock of c wait up to d for first's key. If it gets the key,
// first's Lost() must already be closed; if it does not, Redis must still
// have first's token. what says how first came to this point.
func takeOver(t *testing.T, c *lock.Client, rdb redis.UniversalClient, first *lock.Lock, d time.Duration, what string) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	other := c.NewLock(first.Key(), lock.WithNotify(false), lock.WithBackoff(5*time.Millisecond, 20*time.Millisecond))
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	switch err := other.Acquire(actx); {
	case err == nil:
		if !isClosed(first.Lost()) {
			t.Fatalf("%s; %v later another client holds the key, yet Lost() is open",
				what, time.Since(start).Round(time.Millisecond))
		}
	case !errors.Is(err, lock.ErrNotAcquired):
		t.Fatalf("other client's Acquire() error = %v", err)
	default:
		if got, err := rdb.Get(ctx, lockKey(first.Key())).Result(); got != first.Token() && !isClosed(first.Lost()) {
			t.Fatalf("%s; after %v GET = %q, %v, not our token, yet Lost() is open", what, d, got, err)
		}
	}
}

// holdsPerMaster acquires n locks of c with ttl on each of cl's three
// masters, keys derived from t.Name(), and returns them by master.
func holdsPerMaster(t *testing.T, cl *redistest.Cluster, c *lock.Client, n int, ttl time.Duration) map[*redistest.Server][]*lock.Lock {
	t.Helper()
	ctx := context.Background()
	locks := map[*redistest.Server][]*lock.Lock{}
	for i, held := 0, 0; held < 3*n; i++ {
		if i == 1000 {
			t.Fatalf("1000 keys cover %d masters, want 3", len(locks))
		}
		key := fmt.Sprintf("%s:%d", keyFor(t), i)
		srv, err := cl.MasterForKey(ctx, lockKey(key))
		if err != nil {
			t.Fatalf("MasterForKey(%q): %v", key, err)
		}
		if len(locks[srv]) == n {
			continue
		}
		l := c.NewLock(key, lock.WithTTL(ttl))
		must(t, "Acquire()", l.Acquire(ctx))
		locks[srv] = append(locks[srv], l)
		held++
	}
	return locks
}

// mustPanic fails the test unless fn panics; call names what fn calls
// ("Release()") and want the panic expected of it.
func mustPanic(t *testing.T, call, want string, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s returned; want %s", call, want)
		}
	}()
	fn()
}

// wantPanicLogged fails t unless logs holds an Error record whose message
// contains what, with the panic's value and a stack.
func wantPanicLogged(t *testing.T, logs *logRecorder, what string) {
	t.Helper()
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, r := range logs.records {
		if r.Level != slog.LevelError || !strings.Contains(r.Message, what) {
			continue
		}
		var val, stack string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "panic":
				val = a.Value.String()
			case "stack":
				stack = a.Value.String()
			}
			return true
		})
		if val == "hook panicked" && strings.Contains(stack, "goroutine") {
			return
		}
	}
	t.Fatalf("no Error record %q with the panic and its stack among %d records", what, len(logs.records))
}
