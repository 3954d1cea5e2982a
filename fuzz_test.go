package lock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// fuzzRedis returns a client for the package's in-process miniredis,
// closed when f ends.
func fuzzRedis(f *testing.F) *redis.Client {
	f.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	f.Cleanup(func() { rdb.Close() })
	return rdb
}

// FuzzKey locks arbitrary keys: an empty key is ErrInvalid; any other key
// is held under prefix{key} with the hold's token, and released.
func FuzzKey(f *testing.F) {
	for _, k := range []string{"", "a", "{", "}", "}x", "{a}", "a{b}c", "a\x00b", "\xff\xfe", "lock:{x}", strings.Repeat("z", 300)} {
		f.Add(k)
	}
	rdb := fuzzRedis(f)
	locks := lock.NewClient(rdb, lock.WithTTL(time.Minute))
	f.Cleanup(func() { locks.Close() })
	f.Fuzz(func(t *testing.T, key string) {
		ctx := context.Background()
		l := locks.NewLock(key)
		if l.Key() != key {
			t.Fatalf("Key() = %q, want %q", l.Key(), key)
		}
		ok, err := l.TryAcquire(ctx)
		if key == "" {
			if ok || !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("TryAcquire(\"\") = %v, %v; want false, ErrInvalid", ok, err)
			}
			return
		}
		if err != nil || !ok {
			t.Fatalf("TryAcquire(%q) = %v, %v; want true, nil", key, ok, err)
		}
		redisKey := lock.DefaultPrefix + "{" + key + "}"
		if v, err := rdb.Get(ctx, redisKey).Result(); err != nil || v != l.Token() {
			t.Fatalf("GET %q = %q, %v; want the token %q", redisKey, v, err, l.Token())
		}
		if l.Fence() < 1 {
			t.Fatalf("Fence() = %d, want >= 1", l.Fence())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release(%q) error = %v", key, err)
		}
		if n, _ := rdb.Exists(ctx, redisKey).Result(); n != 0 {
			t.Fatalf("%q still exists after Release", redisKey)
		}
	})
}

// optionCase is one fuzzed combination of options, all durations in
// nanoseconds so that sub-millisecond values are reached too.
type optionCase struct {
	ttl, wait, bmin, bmax, maxHold, ackTimeout int64
	prefix, owner                              string
	mode                                       uint8
	useOwner, fencing, watchdog, notify        bool
	acks                                       int8
}

func (c optionCase) options() []lock.Option {
	opts := []lock.Option{
		lock.WithTTL(time.Duration(c.ttl)),
		lock.WithWaitTimeout(time.Duration(c.wait)),
		lock.WithBackoff(time.Duration(c.bmin), time.Duration(c.bmax)),
		lock.WithMaxHold(time.Duration(c.maxHold)),
		lock.WithPrefix(c.prefix),
		lock.WithReleaseMode(lock.ReleaseMode(c.mode % 4)),
		lock.WithFencing(c.fencing),
		lock.WithWatchdog(c.watchdog),
		lock.WithNotify(c.notify),
		lock.WithReplicaAck(int(c.acks), time.Duration(c.ackTimeout)),
	}
	if c.useOwner {
		opts = append(opts, lock.WithOwner(c.owner))
	}
	return opts
}

// valid is the documented validation rule of every option, written out
// independently of options.go.
func (c optionCase) valid() bool {
	ms := int64(time.Millisecond)
	minTTL := 100 * ms // MinTTL
	mode := lock.ReleaseMode(c.mode % 4)
	switch {
	case c.ttl < minTTL, c.wait < 0, c.bmin <= 0, c.bmax <= 0, c.bmin > c.bmax, c.maxHold < 0:
		return false
	case mode != lock.ReleaseScript && mode != lock.ReleaseWatch:
		return false
	case strings.ContainsAny(c.prefix, "{}"):
		return false
	case c.useOwner && (c.owner == "" || mode == lock.ReleaseWatch):
		return false
	case c.acks < 0, c.acks > 0 && (c.ackTimeout < ms || mode == lock.ReleaseWatch):
		return false
	}
	return true
}

// FuzzOptions builds locks from arbitrary option values: an invalid
// combination must give ErrInvalid from every verb and write nothing; a
// valid one must not fail with ErrInvalid, and a lock it takes must be
// released.
func FuzzOptions(f *testing.F) {
	ms, s := int64(time.Millisecond), int64(time.Second)
	f.Add(30*s, int64(0), 10*ms, 500*ms, int64(0), int64(0), "lock:", "", uint8(0), false, true, true, true, int8(0))
	f.Add(int64(999_999), int64(0), 10*ms, 500*ms, int64(0), int64(0), "", "", uint8(0), false, true, true, true, int8(0))
	f.Add(s, int64(-1), ms, ms, int64(0), int64(0), "p:", "me", uint8(0), true, false, false, false, int8(0))
	f.Add(s, s, 5*ms, ms, int64(0), int64(0), "p{", "", uint8(1), false, true, true, true, int8(0))
	f.Add(s, s, ms, 2*ms, s, 10*ms, "q", "me", uint8(1), true, true, true, true, int8(1))
	f.Add(s, s, ms, 2*ms, -s, int64(0), "", "", uint8(3), false, true, false, true, int8(-1))
	rdb := fuzzRedis(f)
	locks := lock.NewClient(rdb)
	f.Cleanup(func() { locks.Close() })
	// A key per run: a hold a failed run leaves to its TTL (a re-entrant one
	// is never undone) must not make later runs wait.
	var runs atomic.Int64
	f.Fuzz(func(t *testing.T, ttl, wait, bmin, bmax, maxHold, ackTimeout int64, prefix, owner string,
		mode uint8, useOwner, fencing, watchdog, notify bool, acks int8) {
		c := optionCase{ttl, wait, bmin, bmax, maxHold, ackTimeout, prefix, owner, mode, useOwner, fencing, watchdog, notify, acks}
		if c.ackTimeout > 10*ms {
			c.ackTimeout = 10 * ms // miniredis has no replicas: keep a WAIT short
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		before := rdb.DBSize(ctx).Val()
		l := locks.NewLock("opts-"+strconv.FormatInt(runs.Add(1), 10), c.options()...)
		err := l.Acquire(ctx)
		if !c.valid() {
			if !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("Acquire() with %+v = %v, want ErrInvalid", c, err)
			}
			if _, err := l.TryAcquire(ctx); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("TryAcquire() = %v, want ErrInvalid", err)
			}
			if err := l.Release(ctx); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("Release() = %v, want ErrInvalid", err)
			}
			if after := rdb.DBSize(ctx).Val(); after != before {
				t.Fatalf("an invalid lock wrote to Redis: %d keys, was %d", after, before)
			}
			return
		}
		if errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("Acquire() with valid %+v = %v", c, err)
		}
		if err == nil {
			if err := l.Release(ctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Release() error = %v", err)
			}
		}
	})
}
