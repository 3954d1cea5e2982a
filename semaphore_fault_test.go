package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/luascripts"
)

// TestSemaphore_holderStopsRenewing: a holder whose Client stops renewing
// (Close, as a crashed process would) loses its permit: another Client gets
// it once the permit's TTL has run out on the server, and by then the first
// holder's Lost() has closed.
func TestSemaphore_holderStopsRenewing(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	ttl := 600 * time.Millisecond
	crashed := lock.NewClient(tg.newRDB(t), lock.WithTTL(ttl))
	p := crashed.NewSemaphore(key, 1).Permit()
	must(t, "Acquire()", p.Acquire(ctx))
	taken := time.Now()
	crashed.Close()

	other := newClient(t, tg.newRDB(t), lock.WithTTL(ttl), lock.WithWaitTimeout(10*ttl))
	q := other.NewSemaphore(key, 1).Permit()
	must(t, "Acquire() of the crashed holder's permit", q.Acquire(ctx))
	after := time.Since(taken)
	if !isClosed(p.Lost()) {
		t.Fatalf("the permit was taken again %v after the crashed holder's acquire, yet its Lost() is open", after)
	}
	if q.Fence() <= p.Fence() {
		t.Fatalf("fence %d after %d", q.Fence(), p.Fence())
	}
	t.Logf("permit came back %v after it was taken (TTL %v)", after.Round(time.Millisecond), ttl)
	if n := tg.rdb.ZCard(ctx, lockKey(key)).Val(); n != 1 {
		t.Fatalf("ZCARD = %d, want 1: the expired permit still counts", n)
	}
	must(t, "Release()", q.Release(ctx))
}

// TestSemaphore_lostBeforeTTL: a permit removed behind its holder's back is
// reported lost within about a renewal interval, long before its TTL, and
// WithPermit's fn sees its context end with ErrLockLost.
func TestSemaphore_lostBeforeTTL(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		ttl := 900 * time.Millisecond
		c := newClient(t, tg.rdb, lock.WithTTL(ttl))
		sem := c.NewSemaphore(key, 2)
		other := sem.Permit()
		must(t, "Acquire()", other.Acquire(ctx))
		var removed time.Time
		err := sem.WithPermit(ctx, func(ctx context.Context) error {
			members := tg.rdb.ZRange(context.Background(), lockKey(key), 0, -1).Val()
			mine := slices.DeleteFunc(members, func(m string) bool { return m == other.Token() })
			if len(mine) != 1 {
				t.Errorf("members besides the other permit: %v, want 1", mine)
			}
			tg.rdb.ZRem(context.Background(), lockKey(key), mine[0])
			removed = time.Now()
			if tg.mr != nil {
				tg.mr.FastForward(ttl / 3) // miniredis: the renewal's clock is ours
			}
			<-ctx.Done()
			return ctx.Err()
		})
		wantErr(t, "WithPermit()", err, lock.ErrLockLost)
		var le *lock.LostError
		if !errors.As(err, &le) || le.Reason != lock.LossVanished {
			t.Fatalf("WithPermit() error = %v, want a vanished loss", err)
		}
		if after := time.Since(removed); after > ttl {
			t.Fatalf("lost %v after its permit was removed, want within the TTL %v", after, ttl)
		}
		if isClosed(other.Lost()) {
			t.Fatalf("the other permit was reported lost too")
		}
		must(t, "Release() of the other permit", other.Release(ctx))
	})
}

// TestSemaphore_renewed: a permit held past several TTLs is renewed by the
// Client's loop: its expiry on the server moves on, and it still counts.
func TestSemaphore_renewed(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	ttl := 600 * time.Millisecond
	c := newClient(t, tg.rdb, lock.WithTTL(ttl))
	sem := c.NewSemaphore(key, 1)
	p := sem.Permit()
	must(t, "Acquire()", p.Acquire(ctx))
	first := tg.rdb.ZScore(ctx, lockKey(key), p.Token()).Val()
	last, renewals := first, 0
	deadline := time.Now().Add(20 * ttl)
	for renewals < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d renewals seen in %v, want 4", renewals, 20*ttl)
		}
		s, err := tg.rdb.ZScore(ctx, lockKey(key), p.Token()).Result()
		if err != nil {
			t.Fatalf("ZSCORE of our permit: %v (LostErr: %v)", err, p.LostErr())
		}
		if s > last {
			last, renewals = s, renewals+1
		}
	}
	if isClosed(p.Lost()) {
		t.Fatalf("renewed permit reported lost: %v", p.LostErr())
	}
	if ok, err := sem.Permit().TryAcquire(ctx); ok || err != nil {
		t.Fatalf("TryAcquire() beside a renewed permit = %v, %v, want false, nil", ok, err)
	}
	t.Logf("expiry moved %.0fms over 4 renewals (TTL %v)", last-first, ttl)
	must(t, "Release()", p.Release(ctx))
}

// TestSemaphore_lostAcquireReply: an acquire whose reply is lost after it
// took a permit neither leaks the permit nor counts it twice: Acquire's
// retry carries the same token and confirms it (one member), and a
// TryAcquire that gives up undoes it (no member).
func TestSemaphore_lostAcquireReply(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		rdb := tg.newRDB(t)
		h := &dropReplies{drop: 1}
		rdb.AddHook(h)
		sem := newClient(t, rdb, lock.WithBackoff(time.Millisecond, 5*time.Millisecond)).NewSemaphore(key, 2)

		p := sem.Permit()
		must(t, "Acquire() with its first reply lost", p.Acquire(ctx))
		if h.dropped.Load() != 1 {
			t.Fatalf("%d replies dropped, want 1", h.dropped.Load())
		}
		if m := tg.rdb.ZRange(ctx, lockKey(key), 0, -1).Val(); len(m) != 1 || m[0] != p.Token() {
			t.Fatalf("members %v, want our permit %q once", m, p.Token())
		}
		must(t, "Release()", p.Release(ctx))

		h.dropped.Store(0)
		q := sem.Permit()
		ok, err := q.TryAcquire(ctx)
		if ok || err == nil {
			t.Fatalf("TryAcquire() with its reply lost = %v, %v, want false and the error", ok, err)
		}
		if n := tg.rdb.Exists(ctx, lockKey(key)).Val(); n != 0 {
			t.Fatalf("the permit a failed TryAcquire took is still there: %v", tg.rdb.ZRange(ctx, lockKey(key), 0, -1).Val())
		}
		wantAvailable(t, sem, 2)
	})
}

// resendReleases is a go-redis hook that sends every semaphore release
// twice, as a connection that replays a write would: the second run must
// find nothing of ours and touch nobody else's permit.
type resendReleases struct{ resent atomic.Int32 }

func (h *resendReleases) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *resendReleases) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if a := cmd.Args(); err == nil && len(a) > 4 && strings.HasSuffix(fmt.Sprint(a[4]), ":notify") {
			h.resent.Add(1)
			return next(ctx, cmd)
		}
		return err
	}
}

func (h *resendReleases) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestSemaphore_resentRelease: a release sent twice frees one permit, ours:
// the other holder's permit stays, and the second run's answer (not ours)
// is what Release reports, as for a mutex (which is why the library sends
// a release once: see luascripts.OnceCmd).
func TestSemaphore_resentRelease(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		rdb := tg.newRDB(t)
		h := &resendReleases{}
		rdb.AddHook(h)
		sem := newClient(t, rdb).NewSemaphore(key, 3)
		other := newClient(t, tg.newRDB(t)).NewSemaphore(key, 3).Permit()
		must(t, "Acquire()", other.Acquire(ctx))
		p := sem.Permit()
		must(t, "Acquire()", p.Acquire(ctx))
		wantAvailable(t, sem, 1)
		wantErr(t, "Release() whose reply is the resend's", p.Release(ctx), lock.ErrNotHeld)
		if h.resent.Load() != 1 {
			t.Fatalf("%d releases resent, want 1", h.resent.Load())
		}
		wantAvailable(t, sem, 2)
		if _, err := other.TTL(ctx); err != nil {
			t.Fatalf("the other permit after a resent release: TTL() error = %v", err)
		}
		// The same once more by hand, with the release script itself.
		n, err := luascripts.SemRelease.Run(ctx, tg.rdb, []string{lockKey(key), lockKey(key) + ":notify"}, p.Token()).Int()
		if n != 0 || err != nil {
			t.Fatalf("release script run again = %d, %v, want 0 (not ours)", n, err)
		}
		wantAvailable(t, sem, 2)
		must(t, "Release() of the other permit", other.Release(ctx))
	})
}

// TestSemaphore_wakesOneWaiter: a released permit wakes one waiter per
// process, not every waiter: with three waiters in one Client (backoff far
// longer than the test, so only a wake-up makes them try), a release in
// another Client leads to one acquire attempt there, which takes it.
func TestSemaphore_wakesOneWaiter(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		key := keyFor(t)
		holder := newClient(t, tg.newRDB(t)).NewSemaphore(key, 1).Permit()
		must(t, "Acquire()", holder.Acquire(ctx))

		rdb := tg.newRDB(t)
		var attempts atomic.Int32
		rdb.AddHook(countAcquires{fence: lockKey(key) + ":fence", n: &attempts})
		c := newClient(t, rdb, lock.WithBackoff(time.Hour, time.Hour))
		sem := c.NewSemaphore(key, 1)
		got := make(chan *lock.Lock, 3)
		for range 3 {
			go func() {
				p := sem.Permit()
				if p.Acquire(ctx) == nil {
					got <- p
				}
			}()
		}
		waitUntil(t, "3 idle waiters", func() bool { return lock.IdleWaiters(c, key) == 3 })
		before := attempts.Load()
		must(t, "Release()", holder.Release(ctx))
		var winner *lock.Lock
		select {
		case winner = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("no waiter took the released permit")
		}
		waitUntil(t, "2 idle waiters", func() bool { return lock.IdleWaiters(c, key) == 2 })
		if n := attempts.Load() - before; n != 1 {
			t.Fatalf("%d acquire attempts after one release, want 1", n)
		}
		must(t, "Release()", winner.Release(ctx))
		select {
		case winner = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("no waiter took the permit released in its own process")
		}
		must(t, "Release()", winner.Release(ctx))
		<-got
	})
}

// countAcquires counts the acquire scripts on one key: the calls naming
// its fence counter.
type countAcquires struct {
	fence string
	n     *atomic.Int32
}

func (h countAcquires) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countAcquires) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 4 && a[4] == h.fence {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h countAcquires) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// waitUntil polls cond until it holds, failing the test after 10s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// pipelineSizes is a go-redis hook recording how many commands of each
// pipeline run one script (by SHA).
type pipelineSizes struct {
	sha   string
	mu    sync.Mutex
	sizes []int
}

func (h *pipelineSizes) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pipelineSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *pipelineSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if a := c.Args(); len(a) > 1 && a[1] == h.sha {
				n++
			}
		}
		if n > 0 {
			h.mu.Lock()
			h.sizes = append(h.sizes, n)
			h.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// TestSemaphore_renewalBatched: permits of different semaphores of one
// Client, taken together, are renewed together, in the Client's one loop:
// one pipeline carries all of them.
func TestSemaphore_renewalBatched(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	rdb := tg.newRDB(t)
	h := &pipelineSizes{sha: luascripts.SemExtend.Hash()}
	rdb.AddHook(h)
	ttl := 600 * time.Millisecond
	rec := &kindtest.Recorder{Renewals: true}
	c := newClient(t, rdb, lock.WithTTL(ttl), lock.WithObserver(rec))
	warmUp(t, c, rec) // the first hold's check renews alone
	const sems = 5
	var permits []*lock.Lock
	for i := range sems {
		p := c.NewSemaphore(fmt.Sprintf("%s:%d", keyFor(t), i), 2).Permit()
		must(t, "Acquire()", p.Acquire(ctx))
		permits = append(permits, p)
	}
	waitUntil(t, "two renewal pipelines", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.sizes) >= 2
	})
	h.mu.Lock()
	sizes := slices.Clone(h.sizes)
	h.mu.Unlock()
	if slices.Max(sizes) != sems {
		t.Fatalf("renewal pipelines carried %v permits, want one with all %d", sizes, sems)
	}
	for _, p := range permits {
		if isClosed(p.Lost()) {
			t.Fatalf("permit lost: %v", p.LostErr())
		}
		must(t, "Release()", p.Release(ctx))
	}
}

// TestSemaphore_handoffAcrossValues: Semaphores made without options share
// their configuration, so a release hands its permit to a waiter of
// another Semaphore value of the same n in the Client: the waiter's
// Acquire returns with no acquire call of its own after the release. One
// made with options of its own is woken to try for itself instead.
func TestSemaphore_handoffAcrossValues(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		for _, tc := range []struct {
			name     string
			opts     []lock.Option
			attempts int32
		}{
			{"same configuration", nil, 0},
			{"options of its own", []lock.Option{lock.WithTTL(20 * time.Second)}, 1},
		} {
			key := keyFor(t) + ":" + tc.name
			rdb := tg.newRDB(t)
			var acquires atomic.Int32
			rdb.AddHook(countScript{src: luascripts.SemSources[0], sha: luascripts.SemAcquire.Hash(), n: &acquires})
			c := newClient(t, rdb, lock.WithBackoff(time.Hour, time.Hour))
			holder := c.NewSemaphore(key, 1).Permit()
			must(t, "Acquire()", holder.Acquire(ctx))
			done := make(chan error, 1)
			go func() { done <- c.NewSemaphore(key, 1, tc.opts...).Permit().Acquire(ctx) }()
			waitUntil(t, "an idle waiter", func() bool { return lock.IdleWaiters(c, key) == 1 })
			before := acquires.Load()
			must(t, "Release()", holder.Release(ctx))
			select {
			case err := <-done:
				must(t, tc.name+": waiter Acquire()", err)
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: waiter not given the permit", tc.name)
			}
			if n := acquires.Load() - before; n != tc.attempts {
				t.Fatalf("%s: %d acquire calls after the release, want %d", tc.name, n, tc.attempts)
			}
		}
	})
}

// countScript counts the calls of one script, by its source or SHA.
type countScript struct {
	src, sha string
	n        *atomic.Int32
}

func (h countScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && (a[1] == h.src || a[1] == h.sha) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h countScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if a := c.Args(); len(a) > 1 && (a[1] == h.src || a[1] == h.sha) {
				h.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}
