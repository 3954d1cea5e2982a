package lock_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/hooktest"
	"github.com/agentlock/lock/internal/redistest"
)

// deployment is a real Redis a fair-lock or multi-lock test runs on: one
// redis-server, or a 3-master cluster. newRDB returns one more go-redis
// client to it, as another process would have.
type deployment struct {
	name   string
	admin  redis.UniversalClient
	newRDB func(t *testing.T) redis.UniversalClient
}

// eachDeployment runs fn on a real redis-server and on a real 3-master
// Redis Cluster, the shared one (skipped when redis-server is missing, unless
// LOCK_REQUIRE_REDIS=1).
func eachDeployment(t *testing.T, fn func(t *testing.T, d deployment)) {
	t.Helper()
	t.Run("redis", func(t *testing.T) {
		s := redistest.Start(t, redistest.Config{})
		fn(t, deployment{name: "redis", admin: s.Client(t), newRDB: func(t *testing.T) redis.UniversalClient {
			return s.Client(t)
		}})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := sharedCluster(t)
		fn(t, deployment{name: "cluster", admin: cl.Client(t), newRDB: func(t *testing.T) redis.UniversalClient {
			return cl.Client(t)
		}})
	})
}

// waitWorkers waits for wg's goroutines, then fails the test with the
// first error they sent on errs.
func waitWorkers(t *testing.T, wg *sync.WaitGroup, errs chan error) {
	t.Helper()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// waitWaiters waits until l's queue holds n waiters; they join in a
// moment, by a call this test does not control the timing of.
func waitWaiters(t *testing.T, l *lock.Lock, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := l.Waiters(context.Background())
		must(t, "Waiters()", err)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Waiters() = %d after 10s, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFair_arrivalOrder: waiters on 4 Clients (4 processes' worth), each
// joining the queue after the one before, get the key in that order, one
// at a time, with fences increasing; their wake-ups name them alone.
func TestFair_arrivalOrder(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		key := keyFor(t)
		const clients, perClient = 4, 3
		cs := make([]*lock.Client, clients)
		for i := range cs {
			cs[i] = newClient(t, d.newRDB(t), lock.WithFair(true), lock.WithTTL(5*time.Second))
		}
		first := cs[0].NewLock(key)
		must(t, "Acquire()", first.Acquire(ctx))

		var (
			mu     sync.Mutex
			order  []int
			fences []int64
			inside atomic.Int32
			wg     sync.WaitGroup
		)
		errs := make(chan error, clients*perClient)
		for i := range clients * perClient {
			l := cs[i%clients].NewLock(key)
			wg.Go(func() {
				if err := l.Acquire(ctx); err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					errs <- errors.New("two holders at once")
				}
				mu.Lock()
				order, fences = append(order, i), append(fences, l.Fence())
				mu.Unlock()
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					errs <- err
				}
			})
			waitWaiters(t, first, i+1)
		}
		must(t, "Release()", first.Release(ctx))
		waitWorkers(t, &wg, errs)
		for i, got := range order {
			if got != i {
				t.Fatalf("order of acquisition %v, want arrival order", order)
			}
			if i > 0 && fences[i] <= fences[i-1] {
				t.Fatalf("fences %v, want strictly increasing", fences)
			}
		}
		if fences[0] <= first.Fence() {
			t.Fatalf("fence %d after %d", fences[0], first.Fence())
		}
		waitWaiters(t, first, 0)
		if n := d.admin.Exists(ctx, lockKey(key), "lock:{"+key+"}:queue", "lock:{"+key+"}:qtimes").Val(); n != 0 {
			t.Fatalf("%d keys left after the last release, want 0", n)
		}
	})
}

// TestFair_exclusion: 3 Clients, 4 workers each, many rounds on one fair
// key; a non-atomic counter in Redis and the overlap detector must see one
// holder at a time.
func TestFair_exclusion(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		key := keyFor(t)
		counter := "fair-counter:{" + key + "}"
		const clients, workers, rounds = 3, 4, 10
		var inside, overlaps atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, clients*workers)
		for range clients {
			rdb := d.newRDB(t)
			c := newClient(t, rdb, lock.WithFair(true), lock.WithTTL(5*time.Second))
			for range workers {
				wg.Go(func() {
					for range rounds {
						err := c.WithLock(ctx, key, func(ctx context.Context) error {
							if inside.Add(1) != 1 {
								overlaps.Add(1)
							}
							defer inside.Add(-1)
							n, _ := rdb.Get(ctx, counter).Int()
							return rdb.Set(ctx, counter, n+1, time.Minute).Err()
						})
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
		}
		waitWorkers(t, &wg, errs)
		if n := overlaps.Load(); n != 0 {
			t.Fatalf("%d overlapping critical sections", n)
		}
		if n, _ := d.admin.Get(ctx, counter).Int(); n != clients*workers*rounds {
			t.Fatalf("counter = %d, want %d", n, clients*workers*rounds)
		}
	})
}

// TestFair_cancelledWaiterLeaves: a waiter whose ctx ends leaves the
// queue, and the release goes to the one behind it.
func TestFair_cancelledWaiterLeaves(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, tg.rdb, lock.WithFair(true))
	holder := c.NewLock(key)
	must(t, "Acquire()", holder.Acquire(ctx))

	actx, cancel := context.WithCancel(ctx)
	a := newClient(t, tg.newRDB(t), lock.WithFair(true)).NewLock(key)
	aErr := make(chan error, 1)
	go func() { aErr <- a.Acquire(actx) }()
	waitWaiters(t, holder, 1)
	b := newClient(t, tg.newRDB(t), lock.WithFair(true)).NewLock(key)
	bErr := make(chan error, 1)
	go func() { bErr <- b.Acquire(ctx) }()
	waitWaiters(t, holder, 2)

	cancel()
	err := <-aErr
	if !errors.Is(err, lock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire() error = %v, want ErrNotAcquired and context.Canceled", err)
	}
	waitWaiters(t, holder, 1)
	releaseTo(t, tg.rdb, key, holder, b, bErr)
	must(t, "Release()", b.Release(ctx))
}

// TestFair_deadWaiter: a queued waiter whose process can no longer reach
// Redis, at the head of the queue when the holder releases: the release
// hands it the key (with its TTL, as any holder's), and the waiter behind
// it gets the key once that TTL is up, with nobody releasing again.
func TestFair_deadWaiter(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	backoff := lock.WithBackoff(5*time.Millisecond, 50*time.Millisecond)
	holder := newClient(t, tg.rdb, lock.WithFair(true)).NewLock(key)
	must(t, "Acquire()", holder.Acquire(ctx))

	deadRDB := tg.srv.NewClient()
	dead := newClient(t, deadRDB, lock.WithFair(true), backoff, lock.WithTTL(time.Second)).NewLock(key)
	deadErr := make(chan error, 1)
	go func() { deadErr <- dead.Acquire(ctx) }()
	waitWaiters(t, holder, 1)
	// The "process" dies: its connections close, so its Acquire fails and
	// cannot take its place out of the queue.
	deadRDB.Close()
	if err := <-deadErr; err == nil {
		t.Fatal("Acquire() over a closed client succeeded")
	}
	live := newClient(t, tg.newRDB(t), lock.WithFair(true), backoff).NewLock(key)
	liveErr := make(chan error, 1)
	go func() { liveErr <- live.Acquire(ctx) }()
	waitWaiters(t, holder, 2)

	released := time.Now()
	must(t, "Release()", holder.Release(ctx))
	if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got == "" || got == live.Token() {
		t.Fatalf("GET after release = %q, want the dead head's token", got)
	}
	must(t, "live waiter's Acquire()", <-liveErr)
	took := time.Since(released)
	t.Logf("the live waiter got the key %v after the release (the dead head's TTL 1s)", took.Round(time.Millisecond))
	must(t, "Release()", live.Release(ctx))
}

// TestFair_lostReplies: a go-redis hook drops the reply of a waiter's
// queue-join, and later of an acquire that took a free key. The retries
// carry the same token: the waiter is queued once and gets the key at the
// release; the acquire whose reply was lost is confirmed by its retry.
func TestFair_lostReplies(t *testing.T) {
	t.Parallel()
	tg, key, holder := heldFairKey(t)
	ctx := context.Background()

	rdb := tg.newRDB(t)
	h := &dropFairReplies{}
	h.joins.Store(1)
	rdb.AddHook(h)
	c := newClient(t, rdb, lock.WithFair(true), lock.WithBackoff(5*time.Millisecond, 20*time.Millisecond))
	w := c.NewLock(key)
	wErr := make(chan error, 1)
	go func() { wErr <- w.Acquire(ctx) }()
	waitWaiters(t, holder, 1)
	// The queue shows the join as soon as Redis ran it; the hook drops its
	// reply when the reply comes back, a moment later.
	for deadline := time.Now().Add(10 * time.Second); h.joins.Load() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the join's reply was not dropped within 10s")
		}
	}
	// The attempts that follow the lost reply refresh the same entry.
	waitEntryRefreshed(t, tg.rdb, key)
	if n, _ := tg.rdb.LLen(ctx, "lock:{"+key+"}:queue").Result(); n != 1 {
		t.Fatalf("queue length %d after a join's lost reply and its retry, want 1", n)
	}
	must(t, "Release()", holder.Release(ctx))
	must(t, "Acquire()", <-wErr)
	if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != w.Token() {
		t.Fatalf("GET = %q, want the waiter's token", got)
	}
	if w.Fence() <= holder.Fence() {
		t.Fatalf("fence %d after %d", w.Fence(), holder.Fence())
	}
	must(t, "Release()", w.Release(ctx))

	h.wins.Store(1)
	free := c.NewLock(key + ":free")
	must(t, "Acquire() of a free key", free.Acquire(ctx))
	if h.wins.Load() > 0 {
		t.Fatal("no acquire reply was dropped")
	}
	if got := tg.rdb.Get(ctx, lockKey(key+":free")).Val(); got != free.Token() || free.Fence() <= 0 {
		t.Fatalf("GET = %q, fence %d, want our token %q and a fence", got, free.Fence(), free.Token())
	}
	must(t, "Release()", free.Release(ctx))
}

// waitEntryRefreshed waits until the queue entry of key's only waiter has
// been set again by a later attempt.
func waitEntryRefreshed(t *testing.T, rdb *redis.Client, key string) {
	t.Helper()
	ctx := context.Background()
	times := "lock:{" + key + "}:qtimes"
	first, err := rdb.ZRangeWithScores(ctx, times, 0, 0).Result()
	if err != nil || len(first) != 1 {
		t.Fatalf("ZRANGE %s = %v, %v, want one entry", times, first, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		now, _ := rdb.ZRangeWithScores(ctx, times, 0, 0).Result()
		if len(now) == 1 && now[0].Score > first[0].Score {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the waiter did not try again within 10s")
}

// dropFairReplies is a go-redis hook that lets a fair acquire reach Redis
// and then reports its reply lost: the first joins that queued (reply < 0)
// and the first wins that took the key (reply >= 0).
type dropFairReplies struct{ joins, wins atomic.Int32 }

func (*dropFairReplies) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *dropFairReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c, ok := cmd.(*redis.Cmd)
		if err != nil || !ok || !isFairAcquire(cmd) {
			return err
		}
		n := &h.joins
		if v, _ := c.Int64(); v >= 0 {
			n = &h.wins
		}
		if n.Add(-1) >= 0 {
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return nil
	}
}
func (*dropFairReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestFair_lostBeforeTTL: a fair hold deleted behind its back is reported
// lost, as a mutex's is.
func TestFair_lostBeforeTTL(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	ttl := 900 * time.Millisecond
	l := newClient(t, tg.rdb, lock.WithFair(true)).NewLock(key, lock.WithTTL(ttl))
	must(t, "Acquire()", l.Acquire(ctx))
	tg.expire(t, key)
	waitClosed(t, l.Lost(), ttl, "Lost()")
	wantErr(t, "LostErr()", l.LostErr(), lock.ErrLockLost)
}

// TestFair_tryAcquire: TryAcquire takes a free key with nobody queued,
// and neither takes a key others wait for nor joins the queue.
func TestFair_tryAcquire(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		c := newClient(t, tg.rdb, lock.WithFair(true))
		a := c.NewLock(key)
		if ok, err := a.TryAcquire(ctx); !ok || err != nil {
			t.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
		}
		b := c.NewLock(key)
		if ok, err := b.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire() of a held key = %v, %v, want false, nil", ok, err)
		}
		if n, err := a.Waiters(ctx); n != 0 || err != nil {
			t.Fatalf("Waiters() = %d, %v after a TryAcquire, want 0, nil", n, err)
		}
		must(t, "Release()", a.Release(ctx))
	})
}

// TestFair_badInput: options a fair lock cannot take, and a key holding
// another kind, give errors wrapping ErrInvalid, never WRONGTYPE.
func TestFair_badInput(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb)
	for name, opts := range map[string][]lock.Option{
		"owner": {lock.WithFair(true), lock.WithOwner("me")},
		"watch": {lock.WithFair(true), lock.WithReleaseMode(lock.ReleaseWatch)},
		"acks":  {lock.WithFair(true), lock.WithReplicaAck(1, time.Second)},
	} {
		wantErr(t, name+": Acquire()", c.NewLock(keyFor(t), opts...).Acquire(ctx), lock.ErrInvalid)
	}
	key := keyFor(t) + ":zset"
	tg.rdb.ZAdd(ctx, lockKey(key), redis.Z{Score: 1, Member: "x"})
	err := c.NewLock(key, lock.WithFair(true)).Acquire(ctx)
	wantErr(t, "Acquire() of a zset key", err, lock.ErrInvalid)
	if !strings.Contains(err.Error(), "is a semaphore, not a fair lock") {
		t.Fatalf("Acquire() error = %v, want it to name both kinds", err)
	}
	// A reader's hash: the same words as every other kind's error.
	rkey := keyFor(t) + ":rw"
	r := c.NewRWLock(rkey).ReadLock()
	must(t, "ReadLock Acquire()", r.Acquire(ctx))
	defer r.Release(ctx)
	for name, l := range map[string]*lock.Lock{
		"fair":  c.NewLock(rkey, lock.WithFair(true)),
		"mutex": c.NewLock(rkey),
	} {
		_, err = l.TryAcquire(ctx)
		wantErr(t, name+": TryAcquire() of a reader's key", err, lock.ErrInvalid)
		if !strings.Contains(err.Error(), "is a read-write lock, not a ") {
			t.Fatalf("%s: TryAcquire() error = %v, want it to name the read-write lock", name, err)
		}
	}
	m := c.NewMultiLock([]string{rkey, keyFor(t) + ":other"})
	_, err = m.TryAcquire(ctx)
	wantErr(t, "multi-lock TryAcquire() over a reader's key", err, lock.ErrInvalid)
	if !strings.Contains(err.Error(), "is a read-write lock, not a mutex") {
		t.Fatalf("multi-lock TryAcquire() error = %v, want it to name the read-write lock", err)
	}
}

// TestFair_holderGone: a holder whose process can no longer reach Redis
// stops renewing; its key expires by its TTL, and the queue's head, which
// sleeps no longer than the TTL left, takes it.
func TestFair_holderGone(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	ttl := 500 * time.Millisecond
	goneRDB := tg.srv.NewClient()
	holder := newClient(t, goneRDB, lock.WithFair(true), lock.WithTTL(ttl)).NewLock(key)
	must(t, "Acquire()", holder.Acquire(ctx))
	w := newClient(t, tg.newRDB(t), lock.WithFair(true)).NewLock(key)
	wErr := make(chan error, 1)
	go func() { wErr <- w.Acquire(ctx) }()
	waitWaiters(t, w, 1)
	goneRDB.Close()
	must(t, "waiter's Acquire()", <-wErr)
	waitClosed(t, holder.Lost(), ttl, "holder's Lost()")
	if w.Fence() <= holder.Fence() {
		t.Fatalf("fence %d after %d", w.Fence(), holder.Fence())
	}
	must(t, "Release()", w.Release(ctx))
}

// TestFair_leastPrivilege: a Redis user with only the commands README's
// least-privilege section lists for script mode, plus the fair lock's,
// queues, gives up (its leave marks its token departed), hands over and
// releases.
func TestFair_leastPrivilege(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	ctx := context.Background()
	rules := strings.Fields("resetkeys ~lock:* resetchannels &lock:* -@all +evalsha +eval +set +get +exists +type " +
		"+pexpire +pttl +incr +time +del +publish +hset +hsetnx +hget +hdel +hexists +hincrby +subscribe " +
		"+unsubscribe +ping +rpush +lindex +lrem +zadd +zrem +zscore +zcount +zrangebyscore +zremrangebyscore")
	must(t, "ACL SETUSER", srv.ACLSetUser(ctx, "locker", "pw", rules...))
	newRDB := func() *redis.Client {
		opt := srv.Options()
		opt.Username, opt.Password = "locker", "pw"
		rdb := redis.NewClient(opt)
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	key := keyFor(t)
	holder := newClient(t, newRDB(), lock.WithFair(true)).NewLock(key)
	must(t, "Acquire()", holder.Acquire(ctx))
	gctx, giveUp := context.WithCancel(ctx)
	quitter := newClient(t, newRDB(), lock.WithFair(true)).NewLock(key)
	qErr := make(chan error, 1)
	go func() { qErr <- quitter.Acquire(gctx) }()
	waitWaiters(t, holder, 1)
	b := newClient(t, newRDB(), lock.WithFair(true)).NewLock(key)
	bErr := make(chan error, 1)
	go func() { bErr <- b.Acquire(ctx) }()
	waitWaiters(t, holder, 2)
	giveUp()
	wantErr(t, "cancelled Acquire()", <-qErr, lock.ErrNotAcquired)
	waitWaiters(t, holder, 1)
	if n := srv.Client(t).Exists(ctx, "lock:{"+key+"}:qgone").Val(); n != 1 {
		t.Fatalf("EXISTS qgone = %d after a waiter left, want 1", n)
	}
	must(t, "Release()", holder.Release(ctx))
	must(t, "queued waiter's Acquire()", <-bErr)
	must(t, "Release()", b.Release(ctx))
}

// TestFair_panickingObserverTakesWaiterOutOfQueue: a waiter's first
// attempt joins the queue but loses its reply, and the Observer, told of
// that failed attempt on the caller's goroutine, panics. The panic goes on
// to the caller, and its token leaves the queue, as when a wait ends,
// rather than keeping its place (for minutes here) ahead of later waiters.
func TestFair_panickingObserverTakesWaiterOutOfQueue(t *testing.T) {
	t.Parallel()
	tg, key, holder := heldFairKey(t)
	ctx := context.Background()

	rdb := tg.newRDB(t)
	var dropped atomic.Bool
	rdb.AddHook(dropReply{match: func(cmd redis.Cmder) bool { return isAcquire(cmd) && dropped.CompareAndSwap(false, true) }})
	obs := lock.ObserverFunc(func(e lock.Event) {
		if e.Kind == lock.EventAttemptFailed {
			panic("observer panicked")
		}
	})
	w := newClient(t, rdb, lock.WithFair(true), lock.WithObserver(obs), lock.WithBackoff(time.Minute, time.Minute)).NewLock(key)
	mustPanic(t, "Acquire()", "the Observer's panic", func() {
		_ = w.Acquire(ctx)
	})
	if !dropped.Load() {
		t.Fatal("no queue-join's reply dropped")
	}
	waitWaiters(t, holder, 0)
	must(t, "Release()", holder.Release(ctx))
}

// heldFairKey returns a real target, the test's key and a fair lock that
// holds it.
func heldFairKey(t *testing.T) (*target, string, *lock.Lock) {
	t.Helper()
	tg := realTarget(t)
	key := keyFor(t)
	holder := newClient(t, tg.rdb, lock.WithFair(true)).NewLock(key)
	must(t, "Acquire()", holder.Acquire(context.Background()))
	return tg, key, holder
}

// The tests below open the windows in which a fair waiter that gives up
// could leave its entry in the queue behind its back: a release would then
// hand the key to a token nobody listens for, and the key would stay held
// for a whole TTL with the queue stuck behind it.

// fairQueuedBehind starts a fair holder of key and one waiter queued
// behind it (b, on a Client of its own with opts), whose Acquire's error
// arrives on bErr.
func fairQueuedBehind(t *testing.T, tg *target, key string, opts ...lock.Option) (holder, b *lock.Lock, bErr chan error) {
	t.Helper()
	holder = newClient(t, tg.rdb, lock.WithFair(true)).NewLock(key)
	must(t, "Acquire()", holder.Acquire(context.Background()))
	b = newClient(t, tg.newRDB(t), append([]lock.Option{lock.WithFair(true)}, opts...)...).NewLock(key)
	bErr = make(chan error, 1)
	go func() { bErr <- b.Acquire(context.Background()) }()
	waitWaiters(t, holder, 1)
	return holder, b, bErr
}

// fairPassesOn releases holder, whose queue holds b alone: b gets the key,
// and its release frees it, with nobody left to hand it to.
func fairPassesOn(t *testing.T, tg *target, key string, holder, b *lock.Lock, bErr chan error) {
	t.Helper()
	ctx := context.Background()
	must(t, "Release()", holder.Release(ctx))
	must(t, "queued waiter's Acquire()", <-bErr)
	must(t, "Release()", b.Release(ctx))
	if got, err := tg.rdb.Get(ctx, lockKey(key)).Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after the last release = %q, %v: the key was handed to a waiter that left", got, err)
	}
}

// slowWaiter is a fair lock of key whose Client's go-redis client carries
// hook; its backoff is long enough that it makes no second attempt in a
// test, and its queue entry outlives any wait of the test (40s).
func slowWaiter(t *testing.T, tg *target, key string, hook redis.Hook) *lock.Lock {
	t.Helper()
	rdb := tg.newRDB(t)
	rdb.AddHook(hook)
	return newClient(t, rdb, lock.WithFair(true), lock.WithBackoff(time.Second, 10*time.Second)).NewLock(key)
}

// TestFair_cutAttemptLeaves: a waiter whose wait ends while its queue-join
// is out (its reply held back by a hook; the caller's ctx has a deadline,
// so the call runs on its own and the Acquire returns at once) takes that
// join's entry out of the queue once the reply is in: were the late entry
// to stay, the release would hand the key to it, and the key would stay
// held by nobody for its TTL.
func TestFair_cutAttemptLeaves(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	key := keyFor(t)
	holder, b, bErr := fairQueuedBehind(t, tg, key)

	// The first fair acquire's reply, once it ran in Redis.
	g := hooktest.New(t, hooktest.Config{On: hooktest.Calls, After: true, Match: isFairAcquire, Nth: 1, Armed: true})
	w := slowWaiter(t, tg, key, g)
	wctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	wErr := make(chan error, 1)
	go func() { wErr <- w.Acquire(wctx) }()
	<-g.Held() // the join ran in Redis; its reply is held back
	cancel()
	wantErr(t, "cancelled Acquire()", <-wErr, lock.ErrNotAcquired)
	g.Release()
	waitWaiters(t, holder, 1)
	fairPassesOn(t, tg, key, holder, b, bErr)
}

// TestFair_lateAttemptAfterLeave: a waiter's queue-join reaches Redis only
// after the waiter gave up and its leave ran (a hook keeps the join from
// the wire, reports it lost, and the test sends it once the leave is
// done, as a network may deliver it late). The late join must neither
// queue the departed token nor, sent again with the key free, take the
// key.
func TestFair_lateAttemptAfterLeave(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	holder, b, bErr := fairQueuedBehind(t, tg, key)

	d := newLateWrite(isFairAcquire, func(cmd redis.Cmder) bool {
		_, release, ok := fairScriptKeys(cmd)
		return ok && release
	})
	d.giveUp(t, slowWaiter(t, tg, key, d))

	late := d.attempt
	if err := tg.rdb.Do(ctx, late...).Err(); err != nil {
		t.Fatalf("late join: %v", err)
	}
	if n, err := holder.Waiters(ctx); err != nil || n != 1 {
		t.Fatalf("Waiters() after a late join of a departed waiter = %d, %v; want 1", n, err)
	}
	fairPassesOn(t, tg, key, holder, b, bErr)

	// The same join once more (a resent command), with the key free and
	// nobody queued.
	if err := tg.rdb.Do(ctx, late...).Err(); err != nil {
		t.Fatalf("late join resent: %v", err)
	}
	if got, err := tg.rdb.Get(ctx, lockKey(key)).Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after a departed waiter's late join of a free key = %q, %v; want no key", got, err)
	}
	if n, err := holder.Waiters(ctx); err != nil || n != 0 {
		t.Fatalf("Waiters() = %d, %v; want 0", n, err)
	}
}

// TestFair_giveToDepartedWaiter: the queue's head gives up, and its leave
// is held back (before it is sent) until the holder's release has handed
// it the key: the "give:" message finds no waiter in its process, and the
// leave, finding the key holding its token, hands it on to the next in
// line.
func TestFair_giveToDepartedWaiter(t *testing.T) {
	t.Parallel()
	tg, key, holder := heldFairKey(t)
	ctx := context.Background()
	// The first fair release, before it is sent.
	g := hooktest.New(t, hooktest.Config{On: hooktest.Calls, Match: isFairRelease, Nth: 1, Armed: true})
	w := slowWaiter(t, tg, key, g)
	wctx, cancel := context.WithCancel(ctx)
	wErr := make(chan error, 1)
	go func() { wErr <- w.Acquire(wctx) }()
	waitWaiters(t, holder, 1)
	b := newClient(t, tg.newRDB(t), lock.WithFair(true)).NewLock(key)
	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	bErr := make(chan error, 1)
	go func() { bErr <- b.Acquire(bctx) }()
	waitWaiters(t, holder, 2)

	cancel()
	wantErr(t, "cancelled Acquire()", <-wErr, lock.ErrNotAcquired)
	<-g.Held() // the head left its process's waiters; its leave is not sent yet
	must(t, "Release()", holder.Release(ctx))
	if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got == "" || got == b.Token() {
		t.Fatalf("GET after the release = %q, want the departed head's token", got)
	}
	g.Release()
	must(t, "next waiter's Acquire()", <-bErr)
	if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != b.Token() {
		t.Fatalf("GET = %q, want the next waiter's token %q", got, b.Token())
	}
	must(t, "Release()", b.Release(ctx))
}

// fairScriptKeys returns the KEYS of cmd when it runs a fair lock's
// script, and whether it does; it tells the acquire from the release by the
// notify channel only the release names.
func fairScriptKeys(cmd redis.Cmder) (keys []string, release, ok bool) {
	keys = scriptKeys(cmd)
	if !hasKeySuffix(keys, ":queue") {
		return nil, false, false
	}
	return keys, hasKeySuffix(keys, ":notify"), true
}

// isFairAcquire reports whether cmd runs fair_acquire.lua.
func isFairAcquire(cmd redis.Cmder) bool {
	_, release, ok := fairScriptKeys(cmd)
	return ok && !release
}

// isFairRelease reports whether cmd runs a fair lock's release.
func isFairRelease(cmd redis.Cmder) bool {
	_, release, ok := fairScriptKeys(cmd)
	return ok && release
}
