package lock_test

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// xadds is a go-redis hook counting the XADD commands a client sends,
// alone or in a pipeline: none when the scripts write the audit entries.
type xadds struct{ n atomic.Int32 }

func (h *xadds) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *xadds) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "xadd" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *xadds) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == "xadd" {
				h.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// auditedClient returns a Client auditing to stream over a connection of
// its own to tg, and the hook counting that connection's XADDs.
func auditedClient(t *testing.T, tg *target, stream string, opts ...lock.Option) (*lock.Client, *xadds) {
	t.Helper()
	h := &xadds{}
	rdb := tg.newRDB(t)
	rdb.AddHook(h)
	return newClient(t, rdb, append([]lock.Option{lock.WithAudit(stream, 1000)}, opts...)...), h
}

// wantNone fails if the client sent more than most XADDs.
func (h *xadds) wantNone(t *testing.T, most int32) {
	t.Helper()
	if n := h.n.Load(); n > most {
		t.Fatalf("the client sent %d XADDs, want at most %d: the scripts write the entries", n, most)
	}
}

// handOver takes the key with first, then passes it to next (passTo).
func handOver(t *testing.T, c *lock.Client, key string, first, next *lock.Lock) {
	t.Helper()
	must(t, "Acquire()", first.Acquire(context.Background()))
	passTo(t, c, key, first, next)
}

// auditEntries returns the entries of stream, failing the test on error.
func auditEntries(t *testing.T, rdb redis.Cmdable, stream string) []redis.XMessage {
	t.Helper()
	xs, err := rdb.XRange(context.Background(), stream, "-", "+").Result()
	must(t, "XRANGE", err)
	return xs
}

// wantEvents fails unless xs are the events want, in order.
func wantEvents(t *testing.T, xs []redis.XMessage, want ...string) {
	t.Helper()
	var got []string
	for _, x := range xs {
		got = append(got, x.Values["event"].(string))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("audit events = %v, want %v", got, want)
	}
}

// wantEntry fails unless x records event of key by token with fence, owner
// and metadata from this process, at a time (the server's clock, RFC 3339)
// within a second of the entry's ID.
func wantEntry(t *testing.T, x redis.XMessage, event, key, token string, fence int64, owner, metadata string) {
	t.Helper()
	host, _ := os.Hostname()
	v := x.Values
	if v["event"] != event || v["key"] != key || v["token"] != token || v["fence"] != strconv.FormatInt(fence, 10) ||
		v["owner"] != owner || v["host"] != host || v["pid"] != strconv.Itoa(os.Getpid()) || v["metadata"] != metadata {
		t.Fatalf("entry = %v, want event %s key %s token %s fence %d owner %q host %s pid %d metadata %q",
			v, event, key, token, fence, owner, host, os.Getpid(), metadata)
	}
	at, err := time.Parse(time.RFC3339Nano, v["time"].(string))
	ms, _ := strconv.ParseInt(strings.Split(x.ID, "-")[0], 10, 64)
	if err != nil || at.Sub(time.UnixMilli(ms)).Abs() > time.Second {
		t.Fatalf("entry time %v (%v), want the server's clock near the entry ID %s", v["time"], err, x.ID)
	}
}

// TestAudit_inScript: on one node, the mutex's acquire, Extend and release
// write their entries from their own scripts (the client sends no XADD),
// one each, with the hold's token and fence; a failed acquire and the
// release of a lost hold write none.
func TestAudit_inScript(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key, stream := keyFor(t), keyFor(t)+":audit"
		c, h := auditedClient(t, tg, stream, lock.WithMetadata("job-1"))
		l := c.NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		if ok, err := c.NewLock(key).TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire() of a held key = %v, %v; want false, nil", ok, err)
		}
		must(t, "Extend()", l.Extend(ctx, time.Minute))
		must(t, "Release()", l.Release(ctx))
		fence, token := l.Fence(), l.Token()
		must(t, "Acquire() again", l.Acquire(ctx))
		tg.expire(t, key)
		wantErr(t, "Release() of a lost hold", l.Release(ctx), lock.ErrNotHeld)
		var xs []redis.XMessage
		for _, x := range auditEntries(t, tg.rdb, stream) {
			if x.Values["event"] != "lost" { // Release reports the loss it found: by the separate XADD
				xs = append(xs, x)
			}
		}
		wantEvents(t, xs, "acquired", "extended", "released", "acquired")
		for i, ev := range []string{"acquired", "extended", "released"} {
			wantEntry(t, xs[i], ev, key, token, fence, "", "job-1")
		}
		wantEntry(t, xs[3], "acquired", key, l.Token(), l.Fence(), "", "job-1")
		h.wantNone(t, 1) // the loss's, sent by the process
	})
}

// TestAudit_inScript_reentrant: a re-entrant owner's holds show its owner
// id as token, one entry per hold taken or dropped.
// TestAudit_inScript_handoff: a release that hands the hold to a waiter of
// the same Client writes, in its one script, the releaser's "released" and
// the waiter's "acquired" with its new fence.
func TestAudit_inScript_handoff(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key, stream := keyFor(t), keyFor(t)+":audit"
		c, h := auditedClient(t, tg, stream)
		first, next := c.NewLock(key), c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
		handOver(t, c, key, first, next)
		xs := auditEntries(t, tg.rdb, stream)
		wantEvents(t, xs, "acquired", "released", "acquired")
		wantEntry(t, xs[1], "released", key, first.Token(), first.Fence(), "", "")
		wantEntry(t, xs[2], "acquired", key, next.Token(), next.Fence(), "", "")
		must(t, "Release()", next.Release(ctx))
		h.wantNone(t, 0)
	})
}

// TestAudit_inScript_forceRelease: the force-release script writes one
// entry per hold it removes, with that hold's token and fence, and its
// owner, host, pid and metadata when the hold wrote holder info (empty
// otherwise); a force-release of a free key writes none.
// TestAudit_inScript_forceReleaseSemaphore: forcing a semaphore writes one
// entry per permit removed.
// TestAudit_inScript_once: a Once's lock writes "acquired" from its acquire
// and "released" from the script that stores fn's result; a second Once
// that finds the result writes nothing.
// cutOff is a go-redis hook that, once armed, lets the next script call
// reach Redis and loses its reply, then fails every later command before
// it is sent: the process is cut off right after its operation ran.
type cutOff struct {
	mu    sync.Mutex
	armed bool
	sent  bool // the armed call went out: cut off
	// before: fail the armed call itself, unsent.
	before bool
}

func (h *cutOff) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *cutOff) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		armed, sent := h.armed && !h.sent, h.sent
		script := cmd.Name() == "eval" || cmd.Name() == "evalsha"
		h.mu.Unlock()
		switch {
		case sent:
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		case armed && script:
			if !h.before {
				_ = next(ctx, cmd) // the connection's greeting passes too
			}
			h.mu.Lock()
			h.sent = true
			h.mu.Unlock()
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return next(ctx, cmd)
	}
}

func (h *cutOff) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		cut := h.sent
		h.mu.Unlock()
		if cut {
			for _, cmd := range cmds {
				cmd.SetErr(io.ErrUnexpectedEOF)
			}
			return io.ErrUnexpectedEOF
		}
		return next(ctx, cmds)
	}
}

// TestAudit_inScript_atomic: the entry of an acquire or a release is
// written by its script, not by the client after the reply: when the
// process is cut off right after the call ran (the reply lost, nothing sent
// after), the operation took effect and its entry is there; when it is cut
// off just before, neither.
func TestAudit_inScript_atomic(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"acquired", "released"} {
		for _, before := range []bool{false, true} {
			t.Run(op+"/before="+strconv.FormatBool(before), func(t *testing.T) {
				ctx := context.Background()
				tg := realTarget(t)
				key, stream := keyFor(t), keyFor(t)+":audit"
				h := &cutOff{}
				rdb := tg.newRDB(t)
				rdb.AddHook(h)
				c := newClient(t, rdb, lock.WithAudit(stream, 1000), lock.WithCoalescing(false))
				l := c.NewLock(key)
				token := "" // the token the entry must show: the hold's
				if op == "released" {
					must(t, "Acquire()", l.Acquire(ctx))
					token = l.Token()
				}
				h.mu.Lock()
				h.armed, h.before = true, before
				h.mu.Unlock()
				var err error
				if op == "acquired" {
					_, err = l.TryAcquire(ctx)
				} else {
					err = l.Release(ctx)
				}
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("call error = %v, want the lost reply", err)
				}
				held := tg.rdb.Exists(ctx, lockKey(key)).Val() == 1
				if op == "acquired" {
					token = tg.rdb.Get(ctx, lockKey(key)).Val()
				}
				var got []string
				for _, x := range auditEntries(t, tg.rdb, stream) {
					got = append(got, x.Values["event"].(string)+" "+x.Values["token"].(string))
				}
				done := held == (op == "acquired")
				want := map[bool]int{true: 1}[done]
				if op == "released" {
					want++ // the acquire's
				}
				if done == before || len(got) != want || done && got[len(got)-1] != op+" "+token {
					t.Fatalf("cut off %s the call: it took effect %v, entries %v; want effect iff after, its entry iff effect",
						map[bool]string{true: "before", false: "after"}[before], done, got)
				}
			})
		}
	}
}

// TestAudit_cluster: on a Redis Cluster, a stream named with the key's
// {tag} shares its slot and the scripts write the entries; a stream in
// another slot gets them by the separate XADD.
func TestAudit_cluster(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	ctx := context.Background()
	key := keyFor(t)
	other := "audit:elsewhere"
	if a, b := cl.Client(t).ClusterKeySlot(ctx, other).Val(), cl.Client(t).ClusterKeySlot(ctx, lockKey(key)).Val(); a == b {
		t.Fatalf("stream %s shares the slot %d of %s", other, a, lockKey(key))
	}
	for _, tc := range []struct {
		stream   string
		inScript bool
	}{{"audit:{" + key + "}", true}, {other, false}} {
		h := &xadds{}
		rdb := cl.Client(t)
		rdb.AddHook(h)
		c := newClient(t, rdb, lock.WithAudit(tc.stream, 1000))
		l := c.NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		must(t, "Extend()", l.Extend(ctx, time.Minute))
		must(t, "Release()", l.Release(ctx))
		xs := auditEntries(t, rdb, tc.stream)
		wantEvents(t, xs, "acquired", "extended", "released")
		for _, x := range xs {
			wantEntry(t, x, x.Values["event"].(string), key, l.Token(), l.Fence(), "", "")
		}
		if n := h.n.Load(); (n == 0) != tc.inScript {
			t.Fatalf("stream %s: the client sent %d XADDs; want none iff the stream shares the key's slot (%v)", tc.stream, n, tc.inScript)
		}
	}
}

// TestAudit_inScript_semaphore: a semaphore's permits write their entries
// from their scripts, a handoff to a waiter of the same semaphore both the
// releaser's and the waiter's; a permit refused (all taken) writes none.
// TestAudit_handoffOtherAudit: a waiter whose settings audit elsewhere (here
// not at all) is not handed the hold by an audited release: it takes the
// key itself, so each side's entries follow its own settings.
func TestAudit_handoffOtherAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	key, stream := keyFor(t), keyFor(t)+":audit"
	c := newClient(t, tg.rdb)
	first, next := c.NewLock(key, lock.WithAudit(stream, 1000)), c.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
	handOver(t, c, key, first, next)
	must(t, "Release()", next.Release(ctx))
	xs := auditEntries(t, tg.rdb, stream)
	wantEvents(t, xs, "acquired", "released")
	wantEntry(t, xs[1], "released", key, first.Token(), first.Fence(), "", "")
}

// TestAudit_inScript_rwlock: a read-write lock's readers and writer write
// their entries from their scripts; a writer refused while readers hold
// writes none.
// TestAudit_ring: on a Ring, whose scripts cannot know the stream's shard,
// the process writes the entries by separate XADDs.
func TestAudit_ring(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := miniTarget(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": tg.mr.Addr()}})
	t.Cleanup(func() { ring.Close() })
	h := &xadds{}
	ring.AddHook(h)
	key, stream := keyFor(t), keyFor(t)+":audit"
	l := newClient(t, ring, lock.WithAudit(stream, 1000)).NewLock(key)
	must(t, "Acquire()", l.Acquire(ctx))
	must(t, "Release()", l.Release(ctx))
	xs := auditEntries(t, tg.rdb, stream)
	wantEvents(t, xs, "acquired", "released")
	wantEntry(t, xs[1], "released", key, l.Token(), l.Fence(), "", "")
	if n := h.n.Load(); n != 2 {
		t.Fatalf("the Ring client sent %d XADDs, want 2", n)
	}
}
