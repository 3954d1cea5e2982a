package lock_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// The in-script audit of each kind: see audit_script_test.go for the
// helpers and the mutex.

func TestAudit_inScript_reentrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	key, stream := keyFor(t), keyFor(t)+":audit"
	c := newClient(t, tg.rdb, lock.WithAudit(stream, 1000), lock.WithOwner("agent-7"))
	outer, inner := c.NewLock(key), c.NewLock(key)
	must(t, "outer Acquire()", outer.Acquire(ctx))
	must(t, "inner Acquire()", inner.Acquire(ctx))
	must(t, "inner Release()", inner.Release(ctx))
	must(t, "outer Release()", outer.Release(ctx))
	xs := auditEntries(t, tg.rdb, stream)
	wantEvents(t, xs, "acquired", "acquired", "released", "released")
	for _, x := range xs {
		wantEntry(t, x, x.Values["event"].(string), key, "agent-7", outer.Fence(), "agent-7", "")
	}
}

func TestAudit_inScript_forceRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	stream := keyFor(t) + ":audit"
	op := newClient(t, tg.rdb, lock.WithAudit(stream, 1000))
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name string
		opts []lock.Option
		info bool
	}{
		{"info", []lock.Option{lock.WithOwner("pod-a"), lock.WithMetadata("req-1")}, true},
		{"bare", nil, false},
	} {
		key := keyFor(t) + ":" + tc.name
		c := newClient(t, tg.newRDB(t), tc.opts...)
		l := c.NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		before := tg.rdb.XLen(ctx, stream).Val()
		must(t, "ForceRelease()", op.ForceRelease(ctx, key))
		wantErr(t, "ForceRelease() of a free key", op.ForceRelease(ctx, key), lock.ErrNotHeld)
		xs := auditEntries(t, tg.rdb, stream)[before:]
		wantEvents(t, xs, "force-released")
		v := xs[0].Values
		wantToken, owner, wantHost, pid, meta := l.Token(), "", "", "", ""
		if tc.info {
			owner, wantHost, pid, meta = "pod-a", host, strconv.Itoa(os.Getpid()), "req-1"
			// A re-entrant hold: the token is the owner id, as Token()
			// and the acquired entry show it; hold is the hold's own id.
			if hold, _ := v["hold"].(string); !strings.HasPrefix(hold, "pod-a#") {
				t.Fatalf("%s: force-released hold %q, want the hold id of owner pod-a", tc.name, hold)
			}
		} else if _, ok := v["hold"]; ok {
			t.Fatalf("%s: force-released entry %v has a hold field, want none for a plain hold", tc.name, v)
		}
		if v["key"] != key || v["token"] != wantToken || v["fence"] != strconv.FormatInt(l.Fence(), 10) ||
			v["owner"] != owner || v["host"] != wantHost || v["pid"] != pid || v["metadata"] != meta {
			t.Fatalf("%s: force-released entry %v, want token %s fence %d owner %q host %q pid %q metadata %q",
				tc.name, v, wantToken, l.Fence(), owner, wantHost, pid, meta)
		}
	}
}

func TestAudit_inScript_forceReleaseSemaphore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	key, stream := keyFor(t), keyFor(t)+":audit"
	c := newClient(t, tg.rdb)
	op := newClient(t, tg.newRDB(t), lock.WithAudit(stream, 1000))
	s := c.NewSemaphore(key, 3)
	p1, p2 := s.Permit(), s.Permit()
	must(t, "Acquire()", p1.Acquire(ctx))
	must(t, "Acquire()", p2.Acquire(ctx))
	must(t, "ForceRelease()", op.ForceRelease(ctx, key))
	xs := auditEntries(t, tg.rdb, stream)
	wantEvents(t, xs, "force-released", "force-released")
	got := map[any]bool{xs[0].Values["token"]: true, xs[1].Values["token"]: true}
	if !got[p1.Token()] || !got[p2.Token()] {
		t.Fatalf("force-released tokens %v, want %s and %s", got, p1.Token(), p2.Token())
	}
}

func TestAudit_inScript_once(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key, stream := keyFor(t), keyFor(t)+":audit"
		c, h := auditedClient(t, tg, stream)
		fn := func(context.Context) ([]byte, error) { return []byte("done"), nil }
		for range 2 {
			if _, _, err := c.Once(ctx, key, fn); err != nil {
				t.Fatalf("Once() error = %v", err)
			}
		}
		xs := auditEntries(t, tg.rdb, stream)
		wantEvents(t, xs, "acquired", "released")
		if xs[0].Values["token"] != xs[1].Values["token"] || xs[0].Values["fence"] != xs[1].Values["fence"] {
			t.Fatalf("entries %v and %v, want one hold's", xs[0].Values, xs[1].Values)
		}
		h.wantNone(t, 0)
	})
}

func TestAudit_inScript_semaphore(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key, stream := keyFor(t), keyFor(t)+":audit"
		c, h := auditedClient(t, tg, stream, lock.WithBackoff(time.Minute, time.Minute))
		s := c.NewSemaphore(key, 1)
		p1, p2 := s.Permit(), s.Permit()
		handOver(t, c, key, p1, p2)
		if ok, err := s.Permit().TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire() of a full semaphore = %v, %v; want false, nil", ok, err)
		}
		must(t, "Extend()", p2.Extend(ctx, time.Minute))
		must(t, "Release()", p2.Release(ctx))
		xs := auditEntries(t, tg.rdb, stream)
		wantEvents(t, xs, "acquired", "released", "acquired", "extended", "released")
		for i, p := range []*lock.Lock{p1, p1, p2, p2, p2} {
			wantEntry(t, xs[i], xs[i].Values["event"].(string), key, p.Token(), p.Fence(), "", "")
		}
		h.wantNone(t, 0)
	})
}

func TestAudit_inScript_rwlock(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key, stream := keyFor(t), keyFor(t)+":audit"
		c, h := auditedClient(t, tg, stream)
		rw := c.NewRWLock(key)
		r1, r2, w := rw.ReadLock(), rw.ReadLock(), rw.WriteLock()
		must(t, "reader Acquire()", r1.Acquire(ctx))
		must(t, "reader Acquire()", r2.Acquire(ctx))
		if ok, err := w.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("writer TryAcquire() under readers = %v, %v; want false, nil", ok, err)
		}
		must(t, "reader Extend()", r1.Extend(ctx, time.Minute))
		must(t, "reader Release()", r1.Release(ctx))
		must(t, "reader Release()", r2.Release(ctx))
		must(t, "writer Acquire()", w.Acquire(ctx))
		must(t, "writer Release()", w.Release(ctx))
		xs := auditEntries(t, tg.rdb, stream)
		wantEvents(t, xs, "acquired", "acquired", "extended", "released", "released", "acquired", "released")
		for i, l := range []*lock.Lock{r1, r2, r1, r1, r2, w, w} {
			wantEntry(t, xs[i], xs[i].Values["event"].(string), key, l.Token(), l.Fence(), "", "")
		}
		h.wantNone(t, 0)
	})
}

// TestAudit_ownerTokenOneName: every entry of a WithOwner hold names it by
// its owner id, as Token() does — acquired, force-released and lost alike,
// whether the script writes them (one node) or the separate XADD does (a
// Cluster stream outside the key's slot). The force-released entry adds
// the hold's own id as hold.
func TestAudit_ownerTokenOneName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (rdb, admin redis.UniversalClient)
	}{
		{"script", func(t *testing.T) (redis.UniversalClient, redis.UniversalClient) {
			s := redistest.Start(t, redistest.Config{})
			return s.Client(t), s.Client(t)
		}},
		{"separate", func(t *testing.T) (redis.UniversalClient, redis.UniversalClient) {
			cl := sharedCluster(t)
			return cl.Client(t), cl.Client(t)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rdb, admin := tc.start(t)
			key, stream := keyFor(t), keyFor(t)+":audit" // no {tag}: another slot on a Cluster
			c := newClient(t, rdb, lock.WithAudit(stream, 1000), lock.WithOwner("agent-7"))
			op := newClient(t, admin, lock.WithAudit(stream, 1000))
			l := c.NewLock(key)
			must(t, "Acquire()", l.Acquire(ctx))
			must(t, "ForceRelease()", op.ForceRelease(ctx, key))
			waitClosed(t, l.Lost(), 10*time.Second, "Lost() of the force-released hold")
			var xs []redis.XMessage
			for deadline := time.Now().Add(10 * time.Second); ; {
				// The lost entry is written by the loser's engine, after
				// Lost() closes: wait for it.
				if xs = auditEntries(t, admin, stream); len(xs) >= 3 || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The separate XADD of force-released may land after the
			// loser's lost entry.
			events := map[string]redis.XMessage{}
			for _, x := range xs {
				events[x.Values["event"].(string)] = x
				if x.Values["token"] != l.Token() {
					t.Fatalf("%s entry token %v, want %q as Token() gives it: %v", x.Values["event"], x.Values["token"], l.Token(), x.Values)
				}
			}
			if len(xs) != 3 || len(events) != 3 || events["acquired"].ID != xs[0].ID {
				t.Fatalf("audit entries %v, want acquired, then force-released and lost", xs)
			}
			f := events["force-released"].Values
			if hold, _ := f["hold"].(string); !strings.HasPrefix(hold, "agent-7#") {
				t.Fatalf("force-released entry %v: hold %q, want the hold's own id agent-7#…", f, hold)
			}
		})
	}
}
