package lock_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/hooktest"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/luascripts"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// The tests below guard waiters' wake-ups in the sequences that a
// "marking" release would miss: one that publishes only when an attempt
// that found the key taken left a mark (a key named as the channel,
// P{K}:notify), and deletes the mark, or when the releasing Client has
// waiters of its own. Every release publishes. In each sequence an earlier
// release would take the mark and wake a waiter that then does not mark
// the key again. Every waiter's backoff is a minute and every holder's TTL
// too, so only a message wakes a waiter in time; windows are opened with
// scriptGate, never with sleeps.

// scriptTexts returns what a call of script s (one of luascripts.All)
// carries, as EVALSHA or as EVAL: its SHA1 and its source, and its audited
// variant's too.
func scriptTexts(s *redis.Script) []string {
	var texts []string
	for i, a := range luascripts.All {
		if a != s {
			continue
		}
		texts = append(texts, a.Hash(), luascripts.Sources[i])
		if v, src := luascripts.Audited(a); v != nil {
			texts = append(texts, v.Hash(), src)
		}
	}
	return texts
}

// scriptGate returns a Gate that, once armed, holds the next call of script
// s (sent alone or in a pipeline): its reply after Redis ran it, so the
// call took effect and its caller does not know yet; or, with early, the
// call before it is sent.
func scriptGate(t *testing.T, s *redis.Script, early bool) *hooktest.Gate {
	return hooktest.New(t, hooktest.Config{After: !early, Match: hooktest.Script(scriptTexts(s)...), Nth: 1})
}

// waiterSet runs Acquires of one Client and reports each one's outcome by
// name.
type waiterSet struct {
	t   *testing.T
	c   *lock.Client
	key string
	got chan string
	n   int
}

func newWaiterSet(t *testing.T, c *lock.Client, key string) *waiterSet {
	return &waiterSet{t: t, c: c, key: key, got: make(chan string, 16)}
}

// wait starts l's Acquire under ctx as name, and waits until it sits
// between attempts with the ones started before.
func (ws *waiterSet) wait(ctx context.Context, name string, l *lock.Lock) {
	ws.t.Helper()
	ws.start(ctx, name, l, false)
}

// waitAndRelease is wait, l releasing the key as soon as it has it.
func (ws *waiterSet) waitAndRelease(ctx context.Context, name string, l *lock.Lock) {
	ws.t.Helper()
	ws.start(ctx, name, l, true)
}

func (ws *waiterSet) start(ctx context.Context, name string, l *lock.Lock, release bool) {
	ws.t.Helper()
	go func() {
		err := l.Acquire(ctx)
		if err == nil && release {
			if err = l.Release(ctx); err != nil {
				name += " release"
			}
		}
		if err != nil {
			ws.got <- name + ": " + err.Error()
			return
		}
		ws.got <- name
	}()
	ws.n++
	waitIdle(ws.t, ws.c, ws.key, ws.n)
}

// next returns the next outcome, failing after d.
func (ws *waiterSet) next(d time.Duration, what string) string {
	ws.t.Helper()
	select {
	case s := <-ws.got:
		return s
	case <-time.After(d):
		ws.t.Fatalf("%s: nothing within %v", what, d)
		return ""
	}
}

// wokenWithin is how long a waiter woken by a message may take to get a
// free key: far below the minute its timer would take.
const wokenWithin = 5 * time.Second

// holdElsewhere has a holder of another Client take key, and returns its
// release: the release that wakes the waiters, and under a marking release
// takes their mark.
func holdElsewhere(t *testing.T, rdb redis.UniversalClient, key string) (release func()) {
	t.Helper()
	ctx := context.Background()
	other := newClient(t, rdb, lock.WithTTL(time.Minute))
	h := other.NewLock(key)
	must(t, "other Client's Acquire()", h.Acquire(ctx))
	return func() {
		t.Helper()
		must(t, "other Client's Release()", h.Release(ctx))
	}
}

// TestUndo_ofWokenWaitersCutAttemptWakesTheNext: two waiters of one Client
// wait behind another Client's holder, whose release wakes the longer, a
// (and, marking, takes their mark). a's attempt takes the key in Redis,
// but a's ctx ends before the reply comes, so a leaves and the attempt is
// undone by a release of a's token. That undo frees the key: it must wake
// b, the Client's other waiter.
func TestUndo_ofWokenWaitersCutAttemptWakesTheNext(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	release := holdElsewhere(t, tg.rdb, key)

	rdb := tg.newRDB(t)
	gate := scriptGate(t, luascripts.Acquire, false)
	rdb.AddHook(gate)
	c := newClient(t, rdb, slowWaiters...)
	ws := newWaiterSet(t, c, key)
	// A deadline: the attempt then returns at a's cancel (the call is bounded).
	actx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	ws.wait(actx, "a", c.NewLock(key))
	ws.wait(ctx, "b", c.NewLock(key))

	gate.Arm()
	release() // a is woken; its attempt takes the key, its reply is held
	waitClosed(t, gate.Held(), 10*time.Second, "a's attempt")
	defer gate.Release()
	cancel()
	if got := ws.next(10*time.Second, "a leaving"); got == "a" || got == "b" {
		t.Fatalf("first outcome = %q, want a's error", got)
	}
	waitIdle(t, c, key, 1) // b still sleeps
	gate.Release()         // a's attempt returns: its undo frees the key
	if got := ws.next(wokenWithin, "b woken once a's undo freed the key"); got != "b" {
		t.Fatalf("second outcome = %q, want b", got)
	}
}

// TestHandoff_toWaiterThatLeftWakesTheNext: three waiters of one Client, a
// b and c, wait behind another Client's holder, whose release wakes a
// (and, marking, takes their mark). a's release hands the key to b
// (handoff.lua), but b's ctx ends while the handoff's reply is out; the
// handoff is then undone with b's token, freeing the key. c must be woken.
func TestHandoff_toWaiterThatLeftWakesTheNext(t *testing.T) {
	t.Parallel()
	leftDuringRelease(t, scriptGate(t, luascripts.Handoff, false), nil)
}

// TestHandoff_auditedWaiterThatLeftWakesTheNext: as
// TestHandoff_toWaiterThatLeftWakesTheNext, but b audits to a stream and a
// does not, so a's release cannot hand b the key: it deletes it and wakes b
// to try (handoff.go). b's ctx ends before that release is sent, and b
// leaves; c must be woken. (Were the release's message to reach the Client
// before b left, b, claimed, would take the wake-up and drop it: the
// Notifier's signalHead skips only waiters owed one already. Not tested
// here: the order is not under the test's control.)
func TestHandoff_auditedWaiterThatLeftWakesTheNext(t *testing.T) {
	t.Parallel()
	gate := scriptGate(t, luascripts.Release, true)
	leftDuringRelease(t, gate, func(key string) []lock.Option {
		return []lock.Option{lock.WithAudit("{"+key+"}:audit", 100)}
	})
}

// leftDuringRelease has waiters a, b (with bOpts, if any) and c of one
// Client wait behind another Client's holder, whose release wakes a. gate
// holds a's release (what a's release sends to b: see the callers); b's
// ctx ends meanwhile, and once b has left, gate lets the release go on. c
// must be woken.
func leftDuringRelease(t *testing.T, gate *hooktest.Gate, bOpts func(key string) []lock.Option) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	release := holdElsewhere(t, tg.rdb, key)

	rdb := tg.newRDB(t)
	rdb.AddHook(gate)
	c := newClient(t, rdb, slowWaiters...)
	ws := newWaiterSet(t, c, key)
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var opts []lock.Option
	if bOpts != nil {
		opts = bOpts(key)
	}
	a := c.NewLock(key)
	ws.wait(ctx, "a", a)
	ws.wait(bctx, "b", c.NewLock(key, opts...))
	ws.wait(ctx, "c", c.NewLock(key))

	release()
	if got := ws.next(10*time.Second, "a woken"); got != "a" {
		t.Fatalf("first outcome = %q, want a", got)
	}
	waitIdle(t, c, key, 2)

	gate.Arm()
	done := make(chan error, 1)
	go func() { done <- a.Release(ctx) }()
	waitClosed(t, gate.Held(), 10*time.Second, "a's release")
	defer gate.Release()
	cancel()
	if got := ws.next(10*time.Second, "b leaving"); got == "b" || got == "c" {
		t.Fatalf("second outcome = %q, want b's error", got)
	}
	gate.Release()
	must(t, "a.Release()", recv(t, done, "a.Release"))
	if got := ws.next(wokenWithin, "c woken once a's release freed the key"); got != "c" {
		t.Fatalf("third outcome = %q, want c", got)
	}
}

// TestRelease_wakesWaiterWhoseWokenAttemptFailed: a waits in one Client, c
// in another, behind a third Client's holder, whose release wakes both
// (and, marking, takes their mark). a's attempt fails (the connection
// drops before it is sent), c's takes the key. c's release must wake a,
// though no attempt of a's has reached Redis since and c's Client has no
// other waiter.
func TestRelease_wakesWaiterWhoseWokenAttemptFailed(t *testing.T) {
	t.Parallel()
	wokenNeverReached(t, false)
}

// TestRelease_wakesWaitersAfterWokenOneGaveUp: a and b wait in one Client,
// c in another, behind a third Client's holder, whose release wakes a and
// c (and, marking, takes their mark). a's wait ends as it is about to send
// its attempt (its ctx is cancelled then), so no attempt of a's reaches
// Redis and the wake-up it used is not passed on to b; c takes the key.
// c's release must wake b.
func TestRelease_wakesWaitersAfterWokenOneGaveUp(t *testing.T) {
	t.Parallel()
	wokenNeverReached(t, true)
}

// wokenNeverReached has a (and, when a gives up, b) wait in one Client and c
// in another behind a third Client's holder, whose release wakes a and c.
// a's attempt then never reaches Redis: the connection drops, or (giveUp)
// a's ctx ends as it is about to send it. c takes the key; its release
// must wake a, or b when a gave up.
func wokenNeverReached(t *testing.T, giveUp bool) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	release := holdElsewhere(t, tg.rdb, key)

	rdb := tg.newRDB(t)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Once armed, the next acquire of a's Client fails without being sent
	// (failed closes then); with giveUp, a's ctx ends first.
	var armed atomic.Bool
	isAcquire, failed := hooktest.Script(scriptTexts(luascripts.Acquire)...), make(chan struct{})
	fail := &kindtest.FailWhen{Err: io.EOF, Match: func(cmds []redis.Cmder) bool {
		if !slices.ContainsFunc(cmds, isAcquire) || !armed.CompareAndSwap(true, false) {
			return false
		}
		if giveUp {
			cancel()
		}
		close(failed)
		return true
	}}
	if giveUp {
		fail.Err = context.Canceled
	}
	rdb.AddHook(fail)
	ca := newClient(t, rdb, slowWaiters...)
	cc := newClient(t, tg.newRDB(t), slowWaiters...)
	wa, wc := newWaiterSet(t, ca, key), newWaiterSet(t, cc, key)
	wa.wait(actx, "a", ca.NewLock(key))
	want := "a"
	if giveUp {
		wa.wait(ctx, "b", ca.NewLock(key))
		want = "b"
	}
	c := cc.NewLock(key)
	wc.wait(ctx, "c", c)

	armed.Store(true)
	release()
	if got := wc.next(10*time.Second, "c woken"); got != "c" {
		t.Fatalf("c's outcome = %q, want c", got)
	}
	if giveUp {
		if got := wa.next(10*time.Second, "a giving up"); got == "a" || got == "b" {
			t.Fatalf("first outcome in a's Client = %q, want a's error", got)
		}
	}
	// a's woken attempt has failed (a waiter still idle from before its
	// wake-up would count as idle too), and a (or b) sleeps.
	waitClosed(t, failed, 10*time.Second, "a's attempt failing")
	waitIdle(t, ca, key, 1)
	must(t, "c.Release()", c.Release(ctx))
	if got := wa.next(wokenWithin, want+" woken by c's release"); got != want {
		t.Fatalf("outcome in a's Client = %q, want %s", got, want)
	}
}

// TestLock_TTL_watchWritesNoKey: in ReleaseWatch mode TTL only reads the
// hold: it writes no P{K}:notify key (the marking release's mark, which a
// copy of the acquire's SET in the TTL call's MULTI once wrote), so the
// hold's release is not told of a waiter that never was.
func TestLock_TTL_watchWritesNoKey(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	c := newClient(t, tg.rdb, lock.WithReleaseMode(lock.ReleaseWatch))
	l := c.NewLock(key)
	must(t, "Acquire()", l.Acquire(ctx))
	defer l.Release(ctx)
	if _, err := l.TTL(ctx); err != nil {
		t.Fatalf("TTL() error = %v", err)
	}
	if n := tg.rdb.Exists(ctx, lockKey(key)+":notify").Val(); n != 0 {
		t.Fatal("TTL() wrote P{K}:notify")
	}
}

// TestReplicaAck_undoWakesOwnWaiters: with WithReplicaAck on a server with
// no replica, every attempt that takes the key is undone (too few
// acknowledgements: replica.go releases it at once). a and b wait in one
// Client behind another Client's holder, whose release wakes a (and,
// marking, takes their mark); a takes the key and undoes it, its Acquire
// failing. That undo frees the key: b must be woken to try (and fail the
// same way) rather than sleep through its minute's backoff.
func TestReplicaAck_undoWakesOwnWaiters(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	release := holdElsewhere(t, tg.rdb, key)
	c := newClient(t, tg.newRDB(t), append(append([]lock.Option{}, slowWaiters...), lock.WithReplicaAck(1, time.Millisecond))...)
	ws := newWaiterSet(t, c, key)
	ws.wait(ctx, "a", c.NewLock(key))
	ws.wait(ctx, "b", c.NewLock(key))
	release()
	for _, who := range []string{"a", "b"} {
		if got := ws.next(wokenWithin, who+" woken"); got == who {
			t.Fatalf("%s acquired with no replica to acknowledge it", who)
		}
	}
}
