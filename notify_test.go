package lock_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/redistest"
)

// newRing returns a *redis.Ring over the given servers, closed at cleanup.
func newRing(t *testing.T, servers ...*redistest.Server) *redis.Ring {
	t.Helper()
	addrs := map[string]string{}
	for i, s := range servers {
		addrs[fmt.Sprintf("shard%d", i)] = s.Addr()
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	t.Cleanup(func() { ring.Close() })
	return ring
}

// closeWithin fails the test unless c.Close returns within 10s.
func closeWithin(t *testing.T, c *lock.Client) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	must(t, "Close()", recv(t, done, "Close"))
}

// keysOnEachShard returns a key of the test on each of ring's two shards,
// by the shard's address.
func keysOnEachShard(t *testing.T, ring *redis.Ring) map[string]string {
	t.Helper()
	byShard := map[string]string{}
	for i := 0; len(byShard) < 2; i++ {
		key := fmt.Sprintf("%s:%d", keyFor(t), i)
		shard, err := ring.GetShardClientForKey(lockKey(key))
		must(t, "GetShardClientForKey()", err)
		if _, ok := byShard[shard.Options().Addr]; !ok {
			byShard[shard.Options().Addr] = key
		}
	}
	return byShard
}

// TestNotify_ringWakesWaiters: on a *redis.Ring of two real servers, for a
// key on each shard, a waiter in another Client is woken by the release's
// publish (its backoff is a minute), a waiter of the same Client is handed
// the hold, and Close returns: no panic, no hang.
func TestNotify_ringWakesWaiters(t *testing.T) {
	s1, s2 := redistest.Start(t, redistest.Config{}), redistest.Start(t, redistest.Config{})
	ring := newRing(t, s1, s2)
	ctx := context.Background()
	byShard := keysOnEachShard(t, ring)
	holders := newClient(t, ring)
	others := newClient(t, newRing(t, s1, s2)) // another process's Client
	for addr, key := range byShard {
		holder := holders.NewLock(key)
		must(t, "Acquire()", holder.Acquire(ctx))

		// Woken by the publish, on the shard the key lives on.
		waiter := others.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
		done := startAcquire(t, others, waiter, 1)
		must(t, "Release()", holder.Release(ctx))
		must(t, "other Client's waiter Acquire()", recv(t, done, "waiter woken by the publish"))
		direct := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { direct.Close() })
		wantHeldBy(t, direct, waiter, "the key's shard "+addr)

		// Handed over to a waiter of the same Client.
		next := others.NewLock(key, lock.WithBackoff(time.Minute, time.Minute))
		done = startAcquire(t, others, next, 1)
		must(t, "Release()", waiter.Release(ctx))
		must(t, "same Client's waiter Acquire()", recv(t, done, "waiter handed the hold"))
		must(t, "Release()", next.Release(ctx))
	}
	closeWithin(t, holders)
	closeWithin(t, others)
}

// panicSubscribe is a redis.UniversalClient whose Subscribe panics, as a
// *redis.Ring's does when asked for no channel.
type panicSubscribe struct{ *redis.Client }

func (panicSubscribe) Subscribe(context.Context, ...string) *redis.PubSub {
	panic("subscribe: no channel")
}

// TestNotify_subscribePanicLeavesBackoff: a client whose Subscribe panics
// costs waiters their wake-ups, nothing more: Acquire does not panic, the
// waiter gets the lock by its backoff once another Client frees it, and
// Close does not hang on a lock the panic left held.
func TestNotify_subscribePanicLeavesBackoff(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	holders := newClient(t, tg.rdb)
	c := newClient(t, panicSubscribe{tg.newRDB(t)}, lock.WithBackoff(5*time.Millisecond, 20*time.Millisecond))
	for i := range 2 { // the second join opens the subscription again
		holder := holders.NewLock(key)
		must(t, "holder Acquire()", holder.Acquire(ctx))
		waiter := c.NewLock(key)
		done := make(chan any, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- fmt.Errorf("Acquire() panicked: %v", r)
				}
			}()
			done <- waiter.Acquire(ctx)
		}()
		waitIdle(t, c, key, 1) // it failed, tried to listen, and sleeps
		must(t, "holder Release()", holder.Release(ctx))
		if err, _ := recv(t, done, "waiter Acquire").(error); err != nil {
			t.Fatalf("round %d: waiter: %v", i, err)
		}
		must(t, "waiter Release()", waiter.Release(ctx))
	}
	closeWithin(t, c)
}

// pauseOnDial is a go-redis hook that, once armed, pauses srv (SIGSTOP)
// just before the client next dials it, and closes reading once that
// connection waits for the server's first reply (go-redis's greeting).
type pauseOnDial struct {
	srv     *redistest.Server
	armed   atomic.Bool
	reading chan struct{}
	once    sync.Once
}

func (h *pauseOnDial) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != h.srv.Addr() || !h.armed.Swap(false) {
			return next(ctx, network, addr)
		}
		if h.srv.Pause() == nil {
			waitStopped(h.srv.Pid())
		}
		cn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &readSignal{Conn: cn, h: h}, nil
	}
}

// readSignal reports its first Read: the client now waits for the server.
type readSignal struct {
	net.Conn
	h *pauseOnDial
}

func (c *readSignal) Read(b []byte) (int, error) {
	c.h.once.Do(func() { close(c.h.reading) })
	return c.Conn.Read(b)
}

// waitStopped waits, at most 5s, until process pid is stopped: SIGSTOP
// takes effect asynchronously, and a server still running could answer the
// next call.
func waitStopped(pid int) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// The state follows the command name, which is in parentheses.
		if i := bytes.LastIndexByte(b, ')'); err != nil || (i >= 0 && i+2 < len(b) && b[i+2] == 'T') {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *pauseOnDial) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *pauseOnDial) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// stoppingShard is a *redis.Ring of two real servers (ReadTimeout -1, no
// health-check pings) whose next connection to the shard of key, once
// hook is armed, finds that shard stopped (SIGSTOP); another Client holds
// key. resume continues the shard; it also runs at cleanup.
type stoppingShard struct {
	ring   *redis.Ring
	hook   *pauseOnDial
	key    string
	resume func()
}

func newStoppingShard(t *testing.T) *stoppingShard {
	t.Helper()
	s1, s2 := redistest.Start(t, redistest.Config{}), redistest.Start(t, redistest.Config{})
	hook := &pauseOnDial{srv: s2, reading: make(chan struct{})}
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:       map[string]string{"shard0": s1.Addr(), "shard1": s2.Addr()},
		ReadTimeout: -1,
		MaxRetries:  -1,
		// No health-check pings: the only connection dialed to s2 after the
		// hook is armed is the subscription's.
		HeartbeatFrequency: time.Hour,
		NewClient: func(opt *redis.Options) *redis.Client {
			c := redis.NewClient(opt)
			c.AddHook(hook)
			return c
		},
	})
	t.Cleanup(func() { ring.Close() })
	resume := func() { _ = s2.Resume() }
	t.Cleanup(resume)
	ctx := context.Background()
	var key string
	for i := 0; ; i++ {
		key = fmt.Sprintf("%s:%d", keyFor(t), i)
		shard, err := ring.GetShardClientForKey(lockKey(key))
		must(t, "GetShardClientForKey()", err)
		if shard.Options().Addr == s2.Addr() {
			must(t, "PING the key's shard", shard.Ping(ctx).Err()) // its pool has a connection now
			break
		}
	}
	holder := newClient(t, newRing(t, s1, s2)).NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(ctx))
	return &stoppingShard{ring: ring, hook: hook, key: key, resume: resume}
}

// TestClose_promptWhileSubscribingToStoppedShard: on a *redis.Ring, a
// waiter's wake-up subscription connects to the key's shard, which stops
// (SIGSTOP) as the connection is made. Close must still return promptly:
// go-redis holds the subscription's mutex while it greets the server, and
// with ReadTimeout -1 it holds it until the server resumes.
func TestClose_promptWhileSubscribingToStoppedShard(t *testing.T) {
	st := newStoppingShard(t)
	c := lock.NewClient(st.ring, lock.WithBackoff(time.Minute, time.Minute))
	st.hook.armed.Store(true) // the next connection to the shard is the subscription's
	acquired := make(chan error, 1)
	go func() { acquired <- c.NewLock(st.key).Acquire(context.Background()) }()
	recv(t, st.hook.reading, "the waiter's subscription waiting for the stopped shard")

	closed := make(chan struct{})
	start := time.Now()
	go func() {
		c.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(time.Second):
		st.resume()
		<-closed
		<-acquired
		t.Fatalf("Close() blocked %v while a subscription connected to a stopped shard", time.Since(start))
	}
	st.resume()
	wantErr(t, "Acquire() ended by Close", recv(t, acquired, "waiter Acquire"), lock.ErrClosed)
}

// TestAcquire_ctxEndsWaitWhileSubscribingToStoppedShard: on a *redis.Ring,
// a waiter whose wake-up subscription connects to the key's shard as that
// shard stops (SIGSTOP) must still return when its ctx ends: the
// subscription's greeting waits for the server (with ReadTimeout -1, until
// it resumes), and Acquire must not wait with it.
func TestAcquire_ctxEndsWaitWhileSubscribingToStoppedShard(t *testing.T) {
	st := newStoppingShard(t)
	c := newClient(t, st.ring, lock.WithBackoff(time.Minute, time.Minute))
	st.hook.armed.Store(true) // the next connection to the shard is the subscription's
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acquired := make(chan error, 1)
	go func() { acquired <- c.NewLock(st.key).Acquire(ctx) }()
	recv(t, st.hook.reading, "the waiter's subscription waiting for the stopped shard")
	cancel()
	select {
	case err := <-acquired:
		wantErr(t, "Acquire() after its ctx ended", err, context.Canceled)
	case <-time.After(time.Second):
		st.resume()
		<-acquired
		t.Fatalf("Acquire() still waiting 1s after its ctx ended, on a subscription to a stopped shard")
	}
}

// TestNotify_pubsubDenied: for a user denied SUBSCRIBE, waiters (also a
// newcomer that queues behind another) fall back to the backoff timer and
// the holder's TTL and still get the lock.
func TestNotify_pubsubDenied(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	must(t, "ACL SETUSER", tg.srv.ACLSetUser(ctx, "nosub", "pw", "~*", "&*", "+@all", "-subscribe", "-psubscribe", "-ssubscribe"))
	opt := tg.srv.Options()
	opt.Username, opt.Password = "nosub", "pw"
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb, lock.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	key := keyFor(t)
	holder := c.NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(ctx))
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	done := make(chan error, 2)
	var order sync.Mutex
	for range 2 {
		go func() {
			l := c.NewLock(key)
			err := l.Acquire(wctx)
			if err == nil {
				order.Lock()
				err = l.Release(ctx)
				order.Unlock()
			}
			done <- err
		}()
		time.Sleep(30 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	must(t, "holder Release()", holder.Release(ctx))
	for range 2 {
		must(t, "waiter", <-done)
	}
}

// dialPanic is a key held by one Client and a waiter's Client c on it,
// whose go-redis client panics in its next dial once h is armed (the
// pool's connection is made already).
type dialPanic struct {
	tg     *target
	key    string
	holder *lock.Lock
	h      *kindtest.PanicWhen
	logs   *logRecorder
	c      *lock.Client
}

func newDialPanic(t *testing.T) *dialPanic {
	t.Helper()
	ctx := context.Background()
	d := &dialPanic{tg: realTarget(t), key: keyFor(t), h: &kindtest.PanicWhen{Dial: true}, logs: &logRecorder{}}
	d.holder = newClient(t, d.tg.rdb).NewLock(d.key)
	must(t, "holder Acquire()", d.holder.Acquire(ctx))
	rdb := d.tg.newRDB(t)
	must(t, "PING", rdb.Ping(ctx).Err()) // the pool's connection: only the subscription dials next
	rdb.AddHook(d.h)
	d.c = newClient(t, rdb, lock.WithLogger(slog.New(d.logs)), lock.WithBackoff(5*time.Millisecond, 20*time.Millisecond))
	return d
}

// wait starts an Acquire of the key on c and returns once it sleeps.
func (d *dialPanic) wait(t *testing.T) (*lock.Lock, <-chan error) {
	t.Helper()
	l := d.c.NewLock(d.key)
	done := make(chan error, 1)
	go func() { done <- l.Acquire(context.Background()) }()
	waitIdle(t, d.c, d.key, 1)
	return l, done
}

// handOver releases the holder's hold and checks that waiter, whose
// Acquire reports on done, gets the lock; then releases it.
func (d *dialPanic) handOver(t *testing.T, waiter *lock.Lock, done <-chan error) {
	t.Helper()
	ctx := context.Background()
	must(t, "holder Release()", d.holder.Release(ctx))
	if err := recv(t, done, "waiter Acquire"); err != nil {
		t.Fatalf("waiter Acquire() = %v", err)
	}
	must(t, "waiter Release()", waiter.Release(ctx))
}

// TestNotify_panickingSubscribeIsRetriedInsteadOfCrashing: a go-redis hook
// that panics when the wake-up subscription dials (on the Notifier's
// goroutine, where no caller could recover it) does not take the process
// down: the panic is logged at Error level with its stack, the SUBSCRIBE
// counts as failed and is tried again, and the waiter gets the lock once
// its holder frees it.
func TestNotify_panickingSubscribeIsRetriedInsteadOfCrashing(t *testing.T) {
	d := newDialPanic(t)
	d.h.Armed.Store(true)
	waiter, done := d.wait(t)
	eventually(t, "the subscription's dial panics", func() bool { return !d.h.Armed.Load() })
	d.handOver(t, waiter, done)
	wantPanicLogged(t, d.logs, "subscribe panicked")
	closeWithin(t, d.c)
}

// TestNotify_panickingReadGivesUpTheSubscription: a go-redis hook that
// panics when the wake-up reader redials its broken connection (on the
// Notifier's goroutine) does not take the process down: the panic is
// logged at Error level with its stack, and the reader gives that PubSub
// up (go-redis may hold its lock still, so Close must not wait on it): the
// waiter gets the lock by its backoff once its holder frees it, Close
// returns promptly, no goroutine is left, and a later wait subscribes
// afresh.
func TestNotify_panickingReadGivesUpTheSubscription(t *testing.T) {
	ctx := context.Background()
	d := newDialPanic(t)
	waiter, done := d.wait(t)
	eventually(t, "the wake-up subscription is open", func() bool {
		return lock.ClassicSubscriptions(d.c) == 1
	})
	d.h.Armed.Store(true)
	must(t, "CLIENT KILL TYPE pubsub", d.tg.rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Err())
	eventually(t, "the reader's redial panics and the subscription is given up", func() bool {
		return !d.h.Armed.Load() && lock.ClassicSubscriptions(d.c) == 0
	})
	wantPanicLogged(t, d.logs, "wake-up read panicked")
	d.handOver(t, waiter, done)
	must(t, "holder Acquire() again", d.holder.Acquire(ctx))
	waiter, done = d.wait(t)
	eventually(t, "a later wait subscribes afresh", func() bool { return lock.ClassicSubscriptions(d.c) == 1 })
	d.handOver(t, waiter, done)
	closeWithin(t, d.c)
}
