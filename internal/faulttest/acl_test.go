package faulttest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// aclScript is the least privilege the default (script) mode needs: its own
// keys and channels, EVALSHA/EVAL, the commands its scripts call (TIME, by
// which a fencing counter restarts), pub/sub for wake-ups, and PING. go-redis's handshake (HELLO, CLIENT SETINFO) is
// refused and it falls back to RESP2 by itself. "+client|setinfo" must not
// appear: Redis before 7.2 rejects the whole ACL SETUSER for it.
var aclScript = []string{
	"resetkeys", "~lock:*", "resetchannels", "&lock:*", "-@all",
	"+evalsha", "+eval", "+set", "+get", "+exists", "+type", "+pexpire", "+pttl",
	"+incr", "+time", "+del", "+publish", "+hset", "+hsetnx", "+hget", "+hdel",
	"+hexists", "+hincrby", "+subscribe", "+unsubscribe", "+ping",
}

// aclWatch is the least privilege of ReleaseWatch, which runs no script
// (TIME restarts a fencing counter there too).
var aclWatch = []string{
	"resetkeys", "~lock:*", "resetchannels", "&lock:*", "-@all",
	"+watch", "+unwatch", "+multi", "+exec", "+discard", "+set", "+get", "+incr", "+time",
	"+pttl", "+pexpire", "+del", "+publish", "+subscribe", "+unsubscribe", "+ping",
}

// TestSecurity_leastPrivilegeACL runs every verb of the lock as an ACL user
// limited to the lock's keys, its channels and the commands above, in both
// release modes, and checks that the user can do nothing else.
func TestSecurity_leastPrivilegeACL(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  lock.ReleaseMode
		rules []string
	}{
		{"script", lock.ReleaseScript, aclScript},
		{"watch", lock.ReleaseWatch, aclWatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t, redistest.Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := s.ACLSetUser(ctx, "locker", "locker-pw", tc.rules...); err != nil {
				t.Fatalf("ACL SETUSER: %v", err)
			}
			o := s.Options()
			o.Username, o.Password = "locker", "locker-pw"
			rdb := redis.NewClient(o)
			defer rdb.Close()
			t.Logf("ACL SETUSER locker on >password %s", strings.Join(tc.rules, " "))

			// Outside its grant the user is refused.
			if err := rdb.Set(ctx, "other", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
				t.Errorf("SET other = %v, want NOPERM", err)
			}
			if err := rdb.FlushAll(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
				t.Errorf("FLUSHALL = %v, want NOPERM", err)
			}

			locks := lock.NewClient(rdb, lock.WithTTL(2*time.Second), lock.WithReleaseMode(tc.mode))
			defer locks.Close()
			others := lock.NewClient(rdb, lock.WithTTL(2*time.Second), lock.WithReleaseMode(tc.mode))
			defer others.Close()
			exerciseVerbs(ctx, t, locks, others, tc.mode)
		})
	}
}

// exerciseVerbs runs every verb once, a waiter of another Client (as in
// another process) woken by the release's publish, and WithLock; each must
// succeed. (A waiter of the same Client would be handed the hold directly,
// without pub/sub.)
func exerciseVerbs(ctx context.Context, t *testing.T, locks, others *lock.Client, mode lock.ReleaseMode) {
	t.Helper()
	a := locks.NewLock("verbs")
	if err := a.Acquire(ctx); err != nil {
		t.Fatalf("Acquire() error = %v", err)
	}
	if ok, err := locks.NewLock("verbs").TryAcquire(ctx); ok || err != nil {
		t.Errorf("TryAcquire() on a held lock = %v, %v; want false, nil", ok, err)
	}
	if err := a.Extend(ctx, 3*time.Second); err != nil {
		t.Errorf("Extend() error = %v", err)
	}
	if d, err := a.TTL(ctx); err != nil || d <= 0 {
		t.Errorf("TTL() = %v, %v", d, err)
	}
	// A waiter is woken by the release's publish.
	waited := make(chan error, 1)
	b := others.NewLock("verbs", lock.WithBackoff(5*time.Second, 5*time.Second))
	go func() { waited <- b.Acquire(ctx) }()
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	if err := a.Release(ctx); err != nil {
		t.Errorf("Release() error = %v", err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("waiter Acquire() error = %v", err)
		} else if d := time.Since(released); d > 2*time.Second {
			t.Errorf("waiter woke %v after the release; want the publish to wake it", d)
		}
	case <-time.After(6 * time.Second):
		t.Fatalf("waiter not woken")
	}
	if err := b.Release(ctx); err != nil {
		t.Errorf("waiter Release() error = %v", err)
	}
	if err := locks.WithLock(ctx, "verbs", func(context.Context) error { return nil }); err != nil {
		t.Errorf("WithLock() error = %v", err)
	}
	if mode == lock.ReleaseScript {
		o := locks.NewLock("verbs-owner", lock.WithOwner("me"))
		o2 := locks.NewLock("verbs-owner", lock.WithOwner("me"))
		if err := o.Acquire(ctx); err != nil {
			t.Errorf("re-entrant Acquire() error = %v", err)
		}
		if err := o2.Acquire(ctx); err != nil {
			t.Errorf("second re-entrant Acquire() error = %v", err)
		}
		for _, l := range []*lock.Lock{o2, o} {
			if err := l.Release(ctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
				t.Errorf("re-entrant Release() error = %v", err)
			}
		}
	}
}
