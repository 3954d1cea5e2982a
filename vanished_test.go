package lock_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// vanishKinds holds one hold of every kind on c: a mutex, a re-entrant
// mutex, a reader and a writer of read-write locks, a permit.
func vanishKinds(t *testing.T, c *lock.Client) []*lock.Lock {
	t.Helper()
	key := keyFor(t)
	ls := []*lock.Lock{
		c.NewLock(key + ":mutex"),
		c.NewLock(key+":owned", lock.WithOwner("agent-1")),
		c.NewRWLock(key + ":read").ReadLock(),
		c.NewRWLock(key + ":write").WriteLock(),
		c.NewSemaphore(key+":sem", 2).Permit(),
	}
	for _, l := range ls {
		must(t, "Acquire() of "+l.Key(), l.Acquire(context.Background()))
	}
	return ls
}

// wantLoss fails unless every hold of ls is lost with reason want.
func wantLoss(t *testing.T, ls []*lock.Lock, want lock.LossReason) {
	t.Helper()
	for _, l := range ls {
		waitClosed(t, l.Lost(), 10*time.Second, "Lost() of "+l.Key())
		var le *lock.LostError
		if !errors.As(l.LostErr(), &le) || le.Reason != want {
			t.Errorf("%s: LostErr() = %v, want reason %v", l.Key(), l.LostErr(), want)
		}
	}
}

// wantLostLogged fails unless logs has one "lock lost" record per hold of
// ls, each with an err attribute that is its loss error.
func wantLostLogged(t *testing.T, logs *logRecorder, ls []*lock.Lock) {
	t.Helper()
	logs.mu.Lock()
	defer logs.mu.Unlock()
	n := 0
	for _, r := range logs.records {
		if r.Message != "lock lost" {
			continue
		}
		n++
		r.Attrs(func(a slog.Attr) bool {
			if a.Key != "err" {
				return true
			}
			var le *lock.LostError
			if err, ok := a.Value.Any().(error); !ok || !errors.As(err, &le) {
				t.Errorf("lock lost logged with err=%v, want the *LostError", a.Value)
			}
			return false
		})
	}
	if n != len(ls) {
		t.Errorf("%d \"lock lost\" records, want %d", n, len(ls))
	}
}

// TestLoss_redisRestart_vanished: a redis-server restarted without
// persistence forgets every hold; nobody force-released them, so each
// kind reports its hold vanished (the reason a deleted key gives), not
// force-released, and the log line names the loss.
func TestLoss_redisRestart_vanished(t *testing.T) {
	tg := realTarget(t)
	logs := &logRecorder{}
	c := newClient(t, tg.rdb, lock.WithTTL(3*time.Second), lock.WithLogger(slog.New(logs)))
	ls := vanishKinds(t, c)
	if err := tg.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	wantLoss(t, ls, lock.LossVanished)
	wantLostLogged(t, logs, ls)
}

// TestLoss_keysDeleted_vanished: every kind's key deleted behind the
// holders' backs (FLUSHALL) reads as vanished, on both servers.
func TestLoss_keysDeleted_vanished(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		c := newClient(t, tg.newRDB(t), lock.WithTTL(900*time.Millisecond))
		ls := vanishKinds(t, c)
		must(t, "FLUSHALL", tg.rdb.FlushAll(context.Background()).Err())
		wantLoss(t, ls, lock.LossVanished)
	})
}

// TestLoss_forceReleaseMissed_everyKind: a holder of any kind that hears
// no message (WithNotify(false)) learns of a force release at its next
// renewal from the record the release leaves: force-released, not
// vanished.
func TestLoss_forceReleaseMissed_everyKind(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		holder := newClient(t, tg.newRDB(t), lock.WithNotify(false), lock.WithTTL(900*time.Millisecond))
		op := newClient(t, tg.newRDB(t))
		ls := vanishKinds(t, holder)
		for _, l := range ls {
			must(t, "ForceRelease() of "+l.Key(), op.ForceRelease(context.Background(), l.Key()))
		}
		wantLoss(t, ls, lock.LossForceReleased)
	})
}

// TestLoss_forceReleaseMissed_verbs: without renewal (WithWatchdog(false))
// and without the message, the holder's TTL, Extend or Release finds the
// key gone and reads the force release's record: force-released.
func TestLoss_forceReleaseMissed_verbs(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	holder := newClient(t, tg.newRDB(t), lock.WithNotify(false), lock.WithWatchdog(false), lock.WithTTL(time.Minute))
	op := newClient(t, tg.newRDB(t))
	for _, verb := range []struct {
		name string
		call func(l *lock.Lock) error
	}{
		{"TTL", func(l *lock.Lock) error { _, err := l.TTL(ctx); return err }},
		{"Extend", func(l *lock.Lock) error { return l.Extend(ctx, time.Minute) }},
	} {
		l := holder.NewLock(keyFor(t) + ":" + verb.name)
		must(t, "Acquire()", l.Acquire(ctx))
		must(t, "ForceRelease()", op.ForceRelease(ctx, l.Key()))
		wantErr(t, verb.name+"()", verb.call(l), lock.ErrNotHeld)
		wantLoss(t, []*lock.Lock{l}, lock.LossForceReleased)
	}
}
