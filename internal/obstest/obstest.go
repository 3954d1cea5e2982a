// Package obstest holds the test helpers the Observer's tests share, in
// the root package and in the adapters of extra/.
package obstest

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// MiniRDB returns a client of a new in-process miniredis; both end with t.
func MiniRDB(t testing.TB) *redis.Client {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// NewClient returns a lock Client over rdb, closed when t ends.
func NewClient(t testing.TB, rdb redis.UniversalClient, opts ...lock.Option) *lock.Client {
	t.Helper()
	c := lock.NewClient(rdb, opts...)
	t.Cleanup(func() { c.Close() })
	return c
}

// Must fails t when err is not nil.
func Must(t testing.TB, call string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s error = %v, want nil", call, err)
	}
}

// ReleaseAllocs is the mean number of heap allocations of one Release of a
// held lock of c, over 199 locks whose keys start with prefix. It counts
// the whole process's allocations, so run it on a real redis-server
// (miniredis would count its own) and allow half an allocation of slack
// for the background's.
func ReleaseAllocs(t testing.TB, c *lock.Client, prefix string) float64 {
	t.Helper()
	const n = 200
	ctx := context.Background()
	locks := make([]*lock.Lock, n)
	for i := range locks {
		locks[i] = c.NewLock(prefix + ":" + strconv.Itoa(i))
		Must(t, "Acquire()", locks[i].Acquire(ctx))
	}
	Must(t, "Release()", locks[0].Release(ctx)) // warm up
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for _, l := range locks[1:] {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release() error = %v", err)
		}
	}
	runtime.ReadMemStats(&m1)
	return float64(m1.Mallocs-m0.Mallocs) / float64(n-1)
}
