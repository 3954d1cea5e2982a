package lock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
)

// resultKey is the Redis key of a Once result with the default prefix.
func resultKey(key string) string { return lockKey(key) + ":result" }

// notifyKey is the notify channel of a lock with the default prefix.
func notifyKey(key string) string { return lockKey(key) + ":notify" }

// scriptCounter counts, per go-redis client it is hooked into, the calls
// of one script (by its SHA or text), single or pipelined.
type scriptCounter struct {
	script *redis.Script
	src    string
	n      atomic.Int64
}

func (s *scriptCounter) is(cmd redis.Cmder) bool {
	a := cmd.Args()
	if len(a) < 2 {
		return false
	}
	name, _ := a[0].(string)
	body, _ := a[1].(string)
	return (strings.EqualFold(name, "evalsha") && body == s.script.Hash()) ||
		(strings.EqualFold(name, "eval") && body == s.src)
}

func (s *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if s.is(cmd) {
			s.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (s *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if s.is(c) {
				s.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

func onceAcquires() *scriptCounter {
	return &scriptCounter{script: luascripts.OnceAcquire, src: luascripts.OnceAcquireSrc}
}

// waitFor polls cond every millisecond until it holds or d passes, and
// reports whether it held: for states another process reaches (a
// subscription, a key), not for timing.
func waitFor(d time.Duration, cond func() bool) bool {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return false
		}
		<-t.C
	}
	return true
}

// numSub returns the subscribers of channel.
func numSub(ctx context.Context, rdb redis.UniversalClient, channel string) int64 {
	m, err := rdb.PubSubNumSub(ctx, channel).Result()
	if err != nil {
		return -1
	}
	return m[channel]
}

// TestOnce_stampede: 20 callers over 3 Clients (3 go-redis clients, as 3
// processes would have) ask for one missing key at once. fn runs once,
// while every Client has a waiter subscribed, and the 19 others get its
// result, shared, woken by the store's publish.
func TestOnce_stampede(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		const clients, callers = 3, 20
		cs := make([]*lock.Client, clients)
		counters := make([]*scriptCounter, clients)
		for i := range cs {
			rdb := tg.newRDB(t)
			counters[i] = onceAcquires()
			rdb.AddHook(counters[i])
			cs[i] = newClient(t, rdb)
		}
		var runs, started atomic.Int64
		fn := func(ctx context.Context) ([]byte, error) {
			runs.Add(1)
			// Return only once every other caller has started and every
			// Client listens on the key: the others then wait for us.
			if !waitFor(10*time.Second, func() bool {
				return started.Load() == callers && numSub(ctx, tg.rdb, notifyKey(key)) == clients
			}) {
				return nil, errors.New("the other callers never waited")
			}
			return []byte("answer\x00\xff"), nil
		}
		type res struct {
			v      []byte
			shared bool
			err    error
		}
		out := make(chan res, callers)
		for i := range callers {
			go func() {
				started.Add(1)
				v, shared, err := cs[i%clients].Once(ctx, key, fn)
				out <- res{v, shared, err}
			}()
		}
		sharedN := 0
		for range callers {
			r := <-out
			if r.err != nil {
				t.Fatalf("Once() error = %v", r.err)
			}
			if !bytes.Equal(r.v, []byte("answer\x00\xff")) {
				t.Fatalf("Once() = %q, want the answer", r.v)
			}
			if r.shared {
				sharedN++
			}
		}
		if runs.Load() != 1 || sharedN != callers-1 {
			t.Fatalf("fn ran %d times, %d results shared; want 1 and %d", runs.Load(), sharedN, callers-1)
		}
		total := int64(0)
		for _, c := range counters {
			total += c.n.Load()
		}
		t.Logf("%d once-acquire calls for %d callers", total, callers)
	})
}

// TestOnce_storedResult: a stored result comes back in one call to Redis,
// without fn, shared.
func TestOnce_storedResult(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		rdb := tg.newRDB(t)
		c := newClient(t, rdb)
		v, shared, err := c.Once(ctx, key, func(context.Context) ([]byte, error) { return []byte("x"), nil })
		if err != nil || shared || string(v) != "x" {
			t.Fatalf("first Once() = %q, %v, %v; want x, false, nil", v, shared, err)
		}
		rt := &roundTrips{}
		rdb.AddHook(rt)
		v, shared, err = c.Once(ctx, key, func(context.Context) ([]byte, error) {
			t.Error("fn ran although a result was stored")
			return nil, nil
		})
		if err != nil || !shared || string(v) != "x" {
			t.Fatalf("second Once() = %q, %v, %v; want x, true, nil", v, shared, err)
		}
		if rt.n.Load() != 1 {
			t.Fatalf("second Once() made %d round trips, want 1", rt.n.Load())
		}
		if ttl := tg.rdb.PTTL(ctx, resultKey(key)).Val(); ttl <= 0 || ttl > lock.DefaultResultTTL {
			t.Fatalf("PTTL(result) = %v, want within (0, %v]", ttl, lock.DefaultResultTTL)
		}
		if n := tg.rdb.Exists(ctx, lockKey(key)).Val(); n != 0 {
			t.Fatalf("the lock is still there after the store")
		}
	})
}

// TestOnce_forget: Forget drops the result, and fn runs again.
func TestOnce_forget(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		c := newClient(t, tg.rdb)
		var runs atomic.Int64
		fn := func(context.Context) ([]byte, error) {
			return fmt.Appendf(nil, "run %d", runs.Add(1)), nil
		}
		for i, want := range []string{"run 1", "run 1", "", "run 2", "run 2"} {
			if want == "" {
				must(t, "Forget()", c.Forget(ctx, key))
				must(t, "Forget() of nothing", c.Forget(ctx, key+":none"))
				continue
			}
			v, _, err := c.Once(ctx, key, fn)
			if err != nil || string(v) != want {
				t.Fatalf("call %d: Once() = %q, %v; want %q", i, v, err, want)
			}
		}
	})
}

// TestOnce_fnError: a failing fn stores nothing; the lock is free and the
// next caller runs fn.
func TestOnce_fnError(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		c := newClient(t, tg.rdb)
		boom := errors.New("boom")
		v, shared, err := c.Once(ctx, key, func(context.Context) ([]byte, error) { return []byte("partial"), boom })
		if !errors.Is(err, boom) || shared || v != nil {
			t.Fatalf("Once() = %q, %v, %v; want nil, false, boom", v, shared, err)
		}
		if n := tg.rdb.Exists(ctx, resultKey(key), lockKey(key)).Val(); n != 0 {
			t.Fatalf("%d of the result and lock keys left after a failure, want none", n)
		}
		v, shared, err = c.Once(ctx, key, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
		if err != nil || shared || string(v) != "ok" {
			t.Fatalf("Once() after a failure = %q, %v, %v; want ok, false, nil", v, shared, err)
		}
	})
}

// TestOnce_fnErrorWaiterRuns: when fn fails, a caller already waiting runs
// fn next (woken by the release), instead of getting the failure.
func TestOnce_fnErrorWaiterRuns(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	a, b := newClient(t, tg.newRDB(t)), newClient(t, tg.newRDB(t))
	boom := errors.New("boom")
	first := make(chan error, 1)
	go func() {
		_, _, err := a.Once(ctx, key, func(ctx context.Context) ([]byte, error) {
			if !waitFor(10*time.Second, func() bool { return numSub(ctx, tg.rdb, notifyKey(key)) == 2 }) {
				return nil, errors.New("b never listened")
			}
			return nil, boom
		})
		first <- err
	}()
	if !waitFor(10*time.Second, func() bool { return tg.rdb.Exists(ctx, lockKey(key)).Val() == 1 }) {
		t.Fatal("a never took the lock")
	}
	v, shared, err := b.Once(ctx, key, func(context.Context) ([]byte, error) { return []byte("b"), nil })
	if err != nil || shared || string(v) != "b" {
		t.Fatalf("waiter's Once() = %q, %v, %v; want b, false, nil", v, shared, err)
	}
	wantErr(t, "failing Once()", <-first, boom)
}

// TestOnce_errorTTL: WithErrorTTL stores the failure: a later caller gets
// ErrOnceFailed with fn's text, shared, without running fn; after Forget fn
// runs again.
func TestOnce_errorTTL(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		c := newClient(t, tg.rdb, lock.WithErrorTTL(time.Minute))
		boom := errors.New("rate limited")
		_, shared, err := c.Once(ctx, key, func(context.Context) ([]byte, error) { return nil, boom })
		if !errors.Is(err, boom) || shared {
			t.Fatalf("Once() = %v, %v; want boom, false", shared, err)
		}
		if ttl := tg.rdb.PTTL(ctx, resultKey(key)).Val(); ttl <= 0 || ttl > time.Minute {
			t.Fatalf("PTTL(stored failure) = %v, want within (0, 1m]", ttl)
		}
		_, shared, err = c.Once(ctx, key, func(context.Context) ([]byte, error) {
			t.Error("fn ran although a failure was stored")
			return nil, nil
		})
		if !errors.Is(err, lock.ErrOnceFailed) || !shared || !strings.Contains(err.Error(), "rate limited") {
			t.Fatalf("Once() = %v, %v; want ErrOnceFailed carrying fn's text, shared", shared, err)
		}
		must(t, "Forget()", c.Forget(ctx, key))
		v, _, err := c.Once(ctx, key, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
		if err != nil || string(v) != "ok" {
			t.Fatalf("Once() after Forget = %q, %v", v, err)
		}
	})
}

// TestOnce_lostMidFn: the lock is deleted while fn runs (blocked on a
// channel); its result is not stored, and Once returns ErrLockLost.
func TestOnce_lostMidFn(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		c := newClient(t, tg.newRDB(t))
		inFn, proceed := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, _, err := c.Once(ctx, key, func(context.Context) ([]byte, error) {
				close(inFn)
				<-proceed
				return []byte("late"), nil
			})
			done <- err
		}()
		<-inFn
		tg.expire(t, key) // another client deletes the lock
		close(proceed)
		err := <-done
		wantErr(t, "Once()", err, lock.ErrLockLost)
		if n := tg.rdb.Exists(ctx, resultKey(key)).Val(); n != 0 {
			t.Fatal("a result was stored by a caller whose lock was lost")
		}
	})
}

// TestOnce_fnOutlivesHold: fn ignores its ctx and returns after its lock was
// lost and another caller took it. It stores nothing and gets ErrLockLost;
// the other caller's result stays.
func TestOnce_fnOutlivesHold(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	a, b := newClient(t, tg.newRDB(t)), newClient(t, tg.newRDB(t))
	inFn, proceed := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, _, err := a.Once(ctx, key, func(context.Context) ([]byte, error) {
			close(inFn)
			<-proceed
			return []byte("a"), nil
		})
		first <- err
	}()
	<-inFn
	tg.expire(t, key)
	v, shared, err := b.Once(ctx, key, func(context.Context) ([]byte, error) {
		close(proceed) // a finishes while we hold the lock
		wantErr(t, "outlived Once()", <-first, lock.ErrLockLost)
		return []byte("b"), nil
	})
	if err != nil || shared || string(v) != "b" {
		t.Fatalf("second Once() = %q, %v, %v; want b, false, nil", v, shared, err)
	}
	v, shared, err = a.Once(ctx, key, func(context.Context) ([]byte, error) { return []byte("a again"), nil })
	if err != nil || !shared || string(v) != "b" {
		t.Fatalf("Once() after both = %q, %v, %v; want b, true, nil", v, shared, err)
	}
}

// TestOnce_holderDied: the Client running fn stops renewing (Close, as a
// dying process would) while fn hangs. A waiter gets the lock once its TTL
// has run out in Redis, and runs fn itself.
func TestOnce_holderDied(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	ttl := 500 * time.Millisecond
	dead := lock.NewClient(tg.newRDB(t), lock.WithTTL(ttl))
	live := newClient(t, tg.newRDB(t), lock.WithTTL(ttl))
	inFn, hang := make(chan struct{}), make(chan struct{})
	deadDone := make(chan error, 1)
	go func() {
		_, _, err := dead.Once(ctx, key, func(context.Context) ([]byte, error) {
			close(inFn)
			<-hang // ignores its ctx, as a hung process would
			return []byte("dead"), nil
		})
		deadDone <- err
	}()
	<-inFn
	must(t, "Close()", dead.Close())
	v, shared, err := live.Once(ctx, key, func(context.Context) ([]byte, error) {
		if n := tg.rdb.Exists(ctx, lockKey(key)).Val(); n != 1 {
			return nil, errors.New("lock key missing while held")
		}
		return []byte("live"), nil
	})
	if err != nil || shared || string(v) != "live" {
		t.Fatalf("waiter's Once() = %q, %v, %v; want live, false, nil", v, shared, err)
	}
	close(hang)
	wantErr(t, "dead holder's Once()", <-deadDone, lock.ErrLockLost)
	if got := tg.rdb.Get(ctx, resultKey(key)).Val(); !strings.HasSuffix(got, "\nlive") {
		t.Fatalf("stored %q, want the live caller's result", got)
	}
}

// storeDropper makes the first n replies of once_store.lua get lost: after
// (or, with before, instead of) sending the command, it reports a broken
// connection.
type storeDropper struct {
	scriptCounter
	before bool
	left   atomic.Int64
}

func (s *storeDropper) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !s.is(cmd) || s.left.Add(-1) < 0 {
			return next(ctx, cmd)
		}
		s.n.Add(1)
		if !s.before {
			_ = next(ctx, cmd)
		}
		cmd.SetErr(io.ErrUnexpectedEOF)
		return io.ErrUnexpectedEOF
	}
}

// TestOnce_storeReplyLost: the store's reply is lost (after it ran, or
// before it reached Redis). Once sends it again — the script recognises
// its own stored result — so fn's result is stored once, the lock is
// freed, and the caller gets its value.
func TestOnce_storeReplyLost(t *testing.T) {
	t.Parallel()
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("before=%v", before), func(t *testing.T) {
			tg := realTarget(t)
			ctx := context.Background()
			key := keyFor(t)
			rdb := tg.newRDB(t)
			d := &storeDropper{scriptCounter: scriptCounter{script: luascripts.OnceStore, src: luascripts.OnceStoreSrc}, before: before}
			d.left.Store(2)
			rdb.AddHook(d)
			c := newClient(t, rdb)
			var runs atomic.Int64
			v, shared, err := c.Once(ctx, key, func(context.Context) ([]byte, error) {
				runs.Add(1)
				return []byte("v"), nil
			})
			if err != nil || shared || string(v) != "v" {
				t.Fatalf("Once() = %q, %v, %v; want v, false, nil", v, shared, err)
			}
			if d.n.Load() != 2 {
				t.Fatalf("%d store replies dropped, want 2", d.n.Load())
			}
			if n := tg.rdb.Exists(ctx, lockKey(key)).Val(); n != 0 {
				t.Fatal("lock left held after the store")
			}
			v, shared, err = newClient(t, tg.rdb).Once(ctx, key, func(context.Context) ([]byte, error) {
				runs.Add(1)
				return nil, nil
			})
			if err != nil || !shared || string(v) != "v" || runs.Load() != 1 {
				t.Fatalf("Once() = %q, %v, %v after %d runs; want v, true, nil after 1", v, shared, err, runs.Load())
			}
		})
	}
}

// TestOnce_earlyWake: a wake-up for every waiter (4 Clients) arrives while fn still
// runs (nothing stored yet): the waiters look, find the lock held, and wait
// on; fn still runs once, and they get its result.
func TestOnce_earlyWake(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	counter := onceAcquires()
	clients := make([]*lock.Client, 5)
	for i := range clients {
		rdb := tg.newRDB(t)
		rdb.AddHook(counter)
		clients[i] = newClient(t, rdb)
	}
	c := clients[0]
	const waiters = 4
	var runs atomic.Int64
	inFn, proceed := make(chan struct{}), make(chan struct{})
	fn := func(context.Context) ([]byte, error) {
		if runs.Add(1) == 1 {
			close(inFn)
			<-proceed
		}
		return []byte("r"), nil
	}
	out := make(chan error, waiters+1)
	go func() { _, _, err := c.Once(ctx, key, fn); out <- err }()
	<-inFn
	for i := range waiters {
		go func() { _, _, err := clients[1+i].Once(ctx, key, fn); out <- err }()
	}
	if !waitFor(10*time.Second, func() bool { return counter.n.Load() >= 1+waiters }) {
		t.Fatal("the waiters never made their first attempt")
	}
	before := counter.n.Load()
	must(t, "PUBLISH", tg.rdb.Publish(ctx, notifyKey(key), "all").Err())
	if !waitFor(10*time.Second, func() bool { return counter.n.Load() > before }) {
		t.Fatal("no waiter looked again after the early wake-up")
	}
	close(proceed)
	for range waiters + 1 {
		must(t, "Once()", <-out)
	}
	if runs.Load() != 1 {
		t.Fatalf("fn ran %d times, want 1", runs.Load())
	}
}

// TestOnce_cluster: on a 3-master Redis Cluster, keys on every master: a
// stampede of 2 Clients runs fn once per key, and the result lives in the
// lock's slot.
func TestOnce_cluster(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	ctx := context.Background()
	cs := []*lock.Client{newClient(t, cl.Client(t)), newClient(t, cl.Client(t))}
	rdb := cl.Client(t)
	masters := map[string]bool{}
	for i := range 12 {
		key := fmt.Sprintf("%s:%d", keyFor(t), i)
		srv, err := cl.MasterForKey(ctx, lockKey(key))
		must(t, "MasterForKey()", err)
		masters[srv.Addr()] = true
		var runs atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for j := range 8 {
			wg.Go(func() {
				v, _, err := cs[j%2].Once(ctx, key, func(context.Context) ([]byte, error) {
					runs.Add(1)
					return []byte(key), nil
				})
				if err == nil && string(v) != key {
					err = fmt.Errorf("got %q", v)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			must(t, "Once()", err)
		}
		if runs.Load() != 1 {
			t.Fatalf("key %q: fn ran %d times, want 1", key, runs.Load())
		}
		if rdb.ClusterKeySlot(ctx, resultKey(key)).Val() != rdb.ClusterKeySlot(ctx, lockKey(key)).Val() {
			t.Fatal("result key outside the lock's slot")
		}
		must(t, "Forget()", cs[0].Forget(ctx, key))
		if n := rdb.Exists(ctx, resultKey(key)).Val(); n != 0 {
			t.Fatal("Forget() left the result on the cluster")
		}
	}
	if len(masters) != 3 {
		t.Fatalf("keys landed on %d masters, want 3", len(masters))
	}
}

// TestOnce_invalid: bad input is an error wrapping ErrInvalid, never a
// panic, and runs nothing.
func TestOnce_invalid(t *testing.T) {
	t.Parallel()
	m := miniTarget(t)
	ctx := context.Background()
	c := newClient(t, m.rdb)
	fn := func(context.Context) ([]byte, error) {
		t.Error("fn ran on invalid input")
		return nil, nil
	}
	var zero lock.Client
	var nilClient *lock.Client
	cases := []struct {
		name string
		c    *lock.Client
		key  string
		fn   func(context.Context) ([]byte, error)
		opts []lock.Option
	}{
		{"nil fn", c, "k", nil, nil},
		{"empty key", c, "", fn, nil},
		{"zero Client", &zero, "k", fn, nil},
		{"nil Client", nilClient, "k", fn, nil},
		{"owner", c, "k", fn, []lock.Option{lock.WithOwner("o")}},
		{"watch mode", c, "k", fn, []lock.Option{lock.WithReleaseMode(lock.ReleaseWatch)}},
		{"replica ack", c, "k", fn, []lock.Option{lock.WithReplicaAck(1, time.Second)}},
		{"result TTL 0", c, "k", fn, []lock.Option{lock.WithResultTTL(0)}},
		{"error TTL negative", c, "k", fn, []lock.Option{lock.WithErrorTTL(-time.Second)}},
		{"error TTL under 1ms", c, "k", fn, []lock.Option{lock.WithErrorTTL(time.Microsecond)}},
	}
	for _, tc := range cases {
		_, _, err := tc.c.Once(ctx, tc.key, tc.fn, tc.opts...)
		wantErr(t, tc.name+": Once()", err, lock.ErrInvalid)
		_, _, err = lock.OnceValue(ctx, tc.c, tc.key, func(context.Context) (int, error) { return 1, nil }, tc.opts...)
		if tc.fn != nil {
			wantErr(t, tc.name+": OnceValue()", err, lock.ErrInvalid)
		}
	}
	wantErr(t, "Forget() empty key", c.Forget(ctx, ""), lock.ErrInvalid)
	wantErr(t, "Forget() zero Client", zero.Forget(ctx, "k"), lock.ErrInvalid)
	wantErr(t, "Forget() nil Client", nilClient.Forget(ctx, "k"), lock.ErrInvalid)
}

// TestOnce_tooLarge: a result over MaxResultSize is not stored; Once
// returns ErrInvalid and the next caller runs fn, whose result of
// MaxResultSize bytes is stored.
func TestOnce_tooLarge(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, tg.rdb)
	_, _, err := c.Once(ctx, key, func(context.Context) ([]byte, error) {
		return make([]byte, lock.MaxResultSize+1), nil
	})
	wantErr(t, "Once()", err, lock.ErrInvalid)
	if n := tg.rdb.Exists(ctx, resultKey(key), lockKey(key)).Val(); n != 0 {
		t.Fatal("keys left after a result too large")
	}
	max := bytes.Repeat([]byte{7}, lock.MaxResultSize)
	v, _, err := c.Once(ctx, key, func(context.Context) ([]byte, error) { return max, nil })
	if err != nil || len(v) != lock.MaxResultSize {
		t.Fatalf("Once() of MaxResultSize bytes = %d bytes, %v", len(v), err)
	}
	v, shared, err := newClient(t, tg.newRDB(t)).Once(ctx, key, func(context.Context) ([]byte, error) { return nil, nil })
	if err != nil || !shared || !bytes.Equal(v, max) {
		t.Fatalf("shared Once() = %d bytes, %v, %v; want MaxResultSize bytes", len(v), shared, err)
	}
}

// TestOnce_followers: calls of one Client on one key share one call to
// Redis. When it fails with fn's error, they do not get that error: they go
// to Redis themselves, and one of them runs fn; a follower whose ctx ends
// gives up with ErrNotAcquired.
func TestOnce_followers(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	rdb := tg.newRDB(t)
	counter := onceAcquires()
	rdb.AddHook(counter)
	c := newClient(t, rdb)
	const followers = 5
	boom := errors.New("boom")
	var runs atomic.Int64
	// The first fn holds the flight open until the test has seen every
	// follower join and the cancelled one leave: polled from here, the
	// moment all have joined could pass unseen once fn returned.
	joined, proceed := make(chan struct{}), make(chan struct{})
	fn := func(context.Context) ([]byte, error) {
		if runs.Add(1) == 1 {
			if !waitFor(10*time.Second, func() bool { return lock.OnceFollowers(c, key) == followers+1 }) {
				return nil, errors.New("followers never joined")
			}
			close(joined)
			<-proceed
			return nil, boom
		}
		return []byte("second"), nil
	}
	leader := make(chan error, 1)
	go func() { _, _, err := c.Once(ctx, key, fn); leader <- err }()
	if !waitFor(10*time.Second, func() bool { return lock.OnceFollowers(c, key) == 0 }) {
		t.Fatal("no call under way")
	}
	type res struct {
		v      []byte
		shared bool
		err    error
	}
	out := make(chan res, followers)
	for range followers {
		go func() {
			v, shared, err := c.Once(ctx, key, fn)
			out <- res{v, shared, err}
		}()
	}
	gone, cancel := context.WithCancel(ctx)
	quit := make(chan error, 1)
	go func() { _, _, err := c.Once(gone, key, fn); quit <- err }()
	select {
	case <-joined:
	case err := <-leader:
		t.Fatalf("leader's Once() = %v before every follower joined", err)
	}
	cancel()
	wantErr(t, "cancelled follower's Once()", <-quit, lock.ErrNotAcquired)
	close(proceed)
	wantErr(t, "leader's Once()", <-leader, boom)
	sharedN := 0
	for range followers {
		r := <-out
		if r.err != nil || string(r.v) != "second" {
			t.Fatalf("follower's Once() = %q, %v, %v; want second", r.v, r.shared, r.err)
		}
		if r.shared {
			sharedN++
		}
	}
	if runs.Load() != 2 || sharedN != followers-1 {
		t.Fatalf("fn ran %d times, %d shared; want 2 and %d", runs.Load(), sharedN, followers-1)
	}
	t.Logf("%d once-acquire calls for %d callers", counter.n.Load(), followers+2)
}

// TestOnce_panic: fn's panic continues; the lock is released and nothing is
// stored.
func TestOnce_panic(t *testing.T) {
	t.Parallel()
	m := miniTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, m.rdb)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want boom", r)
			}
		}()
		_, _, _ = c.Once(ctx, key, func(context.Context) ([]byte, error) { panic("boom") })
	}()
	if m.mr.Exists(resultKey(key)) || m.mr.Exists(lockKey(key)) {
		t.Fatal("keys left after fn panicked")
	}
}

// TestOnce_waitEnds: a waiter whose ctx ends gets ErrNotAcquired and the
// cause, and no result.
func TestOnce_waitEnds(t *testing.T) {
	t.Parallel()
	m := miniTarget(t)
	key := keyFor(t)
	c := newClient(t, m.rdb)
	l := c.NewLock(key)
	must(t, "Acquire()", l.Acquire(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := c.Once(ctx, key, func(context.Context) ([]byte, error) { return nil, nil })
	wantErr(t, "Once()", err, lock.ErrNotAcquired)
	wantErr(t, "Once()", err, context.Canceled)
	must(t, "Release()", l.Release(context.Background()))
}

// TestOnceValue: JSON round trip, the holder included; a stored value of
// another shape is a decode error; OnceFence gives fn its hold's fence.
func TestOnceValue(t *testing.T) {
	t.Parallel()
	m := miniTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, m.rdb)
	type answer struct {
		Text  string
		Score float64
		Fence int64
	}
	fn := func(ctx context.Context) (answer, error) {
		return answer{Text: "hi", Score: 0.5, Fence: lock.OnceFence(ctx)}, nil
	}
	a, shared, err := lock.OnceValue(ctx, c, key, fn)
	if err != nil || shared || a.Text != "hi" || a.Fence <= 0 {
		t.Fatalf("OnceValue() = %+v, %v, %v; want hi with a fence, false, nil", a, shared, err)
	}
	b, shared, err := lock.OnceValue(ctx, c, key, fn)
	if err != nil || !shared || b != a {
		t.Fatalf("second OnceValue() = %+v, %v, %v; want %+v, true, nil", b, shared, err, a)
	}
	_, shared, err = lock.OnceValue(ctx, c, key, func(context.Context) (int, error) { return 1, nil })
	if err == nil || !shared {
		t.Fatalf("OnceValue() of another type = %v, %v; want a decode error, shared", shared, err)
	}
	if lock.OnceFence(ctx) != 0 {
		t.Fatal("OnceFence() outside fn != 0")
	}
}

// FuzzOnce_result: any bytes, of sizes up to MaxResultSize, come back
// unchanged to the caller that ran fn and to one that shares the result.
func FuzzOnce_result(f *testing.F) {
	f.Add([]byte(nil), uint32(0))
	f.Add([]byte("\n"), uint32(0))
	f.Add([]byte("v\n"), uint32(0))
	f.Add([]byte("e\x00\xff\n"), uint32(3))
	f.Add([]byte{0}, uint32(lock.MaxResultSize-1))
	f.Fuzz(func(t *testing.T, data []byte, pad uint32) {
		tg := miniTarget(t)
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		if len(data) > lock.MaxResultSize {
			data = data[:lock.MaxResultSize]
		}
		want := append(bytes.Clone(data), bytes.Repeat([]byte{0xA5}, int(pad)%(lock.MaxResultSize-len(data)+1))...)
		v, shared, err := c.Once(ctx, "fuzz", func(context.Context) ([]byte, error) { return bytes.Clone(want), nil })
		if err != nil || shared || !bytes.Equal(v, want) {
			t.Fatalf("Once() = %d bytes, %v, %v; want %d bytes back, false, nil", len(v), shared, err, len(want))
		}
		v, shared, err = c.Once(ctx, "fuzz", func(context.Context) ([]byte, error) { return nil, errors.New("ran") })
		if err != nil || !shared || !bytes.Equal(v, want) {
			t.Fatalf("shared Once() = %d bytes, %v, %v; want %d bytes, true, nil", len(v), shared, err, len(want))
		}
	})
}

// TestOnce_otherKind: a key whose P{K} holds another kind of lock (the
// script signals it with a "KIND " error reply) is an error wrapping
// ErrInvalid that names the kind; fn does not run.
func TestOnce_otherKind(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	// Stand in for the foreign-kind check of acquire.lua, which is not on
	// this branch: every once-acquire gets the reply that check gives.
	rdb := tg.newRDB(t)
	rdb.AddHook(kindReply{})
	c := newClient(t, rdb)
	_, _, err := c.Once(ctx, key, func(context.Context) ([]byte, error) {
		t.Error("fn ran on another kind's key")
		return nil, nil
	})
	wantErr(t, "Once()", err, lock.ErrInvalid)
	if !strings.Contains(err.Error(), "semaphore") {
		t.Fatalf("Once() error = %v, want it to name the other kind", err)
	}
}

// kindReply answers every once-acquire with the foreign-kind error reply.
type kindReply struct{}

func (kindReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (kindReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if onceAcquires().is(cmd) {
			err := redis.Error(kindErr("KIND semaphore"))
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (kindReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// kindErr is a Redis error reply (go-redis's proto.RedisError is a string
// type with RedisError()).
type kindErr string

func (e kindErr) Error() string { return string(e) }
func (kindErr) RedisError()     {}

// TestOnce_watchdog: fn runs past the lock's TTL; the watchdog renews the
// lock meanwhile, so the result is stored and nobody else ran fn.
func TestOnce_watchdog(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	ttl := 300 * time.Millisecond
	c := newClient(t, tg.newRDB(t), lock.WithTTL(ttl))
	v, shared, err := c.Once(ctx, key, func(ctx context.Context) ([]byte, error) {
		// Return after the lock was renewed 4 times (its PTTL went up):
		// more than one TTL after it was taken.
		renewals, last := 0, ttl
		ok := waitFor(10*time.Second, func() bool {
			left := tg.rdb.PTTL(ctx, lockKey(key)).Val()
			if left > last {
				renewals++
			}
			last = left
			return renewals >= 4 || ctx.Err() != nil
		})
		if !ok || ctx.Err() != nil {
			return nil, fmt.Errorf("after %d renewals: %v", renewals, context.Cause(ctx))
		}
		return []byte("long"), nil
	})
	if err != nil || shared || string(v) != "long" {
		t.Fatalf("Once() = %q, %v, %v; want long, false, nil", v, shared, err)
	}
	if got := tg.rdb.Get(ctx, resultKey(key)).Val(); !strings.HasSuffix(got, "\nlong") {
		t.Fatalf("stored %q, want the result", got)
	}
}

// TestOnce_closed: after Close, Once returns ErrClosed without running fn;
// Forget still works.
func TestOnce_closed(t *testing.T) {
	t.Parallel()
	m := miniTarget(t)
	ctx := context.Background()
	c := lock.NewClient(m.rdb)
	must(t, "Close()", c.Close())
	_, _, err := c.Once(ctx, keyFor(t), func(context.Context) ([]byte, error) {
		t.Error("fn ran after Close")
		return nil, nil
	})
	wantErr(t, "Once()", err, lock.ErrClosed)
	must(t, "Forget()", c.Forget(ctx, keyFor(t)))
}
