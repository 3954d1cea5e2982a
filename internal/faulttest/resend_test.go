package faulttest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// cutRig is a lock Client whose connections run through toxiproxy, with a
// go-redis hook that can cut one reply: cut adds a limit_data toxic, which
// passes the next n bytes the server sends and then closes the connection.
// The server has run the command; go-redis sees a broken connection and may
// resend on a new one. The toxic is removed before that new connection is
// dialled (one connection in each of go-redis's pools, dialled up front: a
// resend must dial), so a resend goes through whole. A gate can hold script
// calls sent alone, to queue calls behind them in the Client's coalescer.
type cutRig struct {
	srv   *redistest.Server
	admin *redis.Client // straight to the server
	proxy *toxiproxy.Proxy
	locks *lock.Client

	mu    sync.Mutex
	toxic bool // the cut toxic is on
	arm   int  // > 0: the next pipeline gets the toxic, passing arm bytes

	held atomic.Int32  // script calls held at the gate
	pass chan struct{} // a send lets one held call through
	open chan struct{} // closed: the gate lets everything through
	on   atomic.Bool   // the gate holds script calls
}

func newCutRig(t *testing.T) *cutRig {
	t.Helper()
	r := &cutRig{pass: make(chan struct{}), open: make(chan struct{})}
	r.srv = redistest.Start(t, redistest.Config{})
	r.admin = r.srv.Client(t)
	r.proxy = startProxy(t, r.srv.Addr())
	o := r.srv.Options()
	o.Addr = r.proxy.Listen
	o.PoolSize, o.PipelinePoolSize = 1, 1
	rdb := redis.NewClient(o)
	// Dial both pools' connection now, so that a later dial is a resend's.
	if _, err := rdb.Pipelined(context.Background(), func(p redis.Pipeliner) error {
		return p.Ping(context.Background()).Err()
	}); err != nil {
		t.Fatalf("PING: %v", err)
	}
	rdb.AddHook(r)
	r.locks = lock.NewClient(rdb)
	// A Client's first hold opens its force-release inbox subscription, a
	// connection of its own through the proxy: open it now, before any
	// test arms a cut, so a cut never lands on its bytes instead.
	ctx := context.Background()
	warm := r.locks.NewLock("cut-rig-warm-up")
	if err := warm.Acquire(ctx); err != nil {
		t.Fatalf("warm-up Acquire() error = %v", err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatalf("warm-up Release() error = %v", err)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		n, err := r.admin.PubSubNumSub(ctx, "lock:force").Result()
		if err == nil && n["lock:force"] == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the Client's force-release inbox was not subscribed within 10s: %v, %v", n, err)
		}
	}
	t.Cleanup(func() {
		r.openGate()
		r.locks.Close()
		rdb.Close()
	})
	return r
}

// cut makes the server's next n bytes on the connection the last ones.
func (r *cutRig) cut(t *testing.T, n int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.putToxic(n); err != nil {
		t.Fatal(err)
	}
}

// putToxic adds the cut toxic. r.mu is held.
func (r *cutRig) putToxic(n int) error {
	js := fmt.Sprintf(`{"name":"cut","type":"limit_data","stream":"downstream","attributes":{"bytes":%d}}`, n)
	if _, err := r.proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		return fmt.Errorf("add toxic %s: %w", js, err)
	}
	r.toxic = true
	return nil
}

// uncut removes the toxic if it is still on. r.mu is held.
func (r *cutRig) uncut() {
	if r.toxic {
		_ = r.proxy.Toxics.RemoveToxic(context.Background(), "cut")
		r.toxic = false
	}
}

func (r *cutRig) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		r.mu.Lock()
		r.uncut()
		r.mu.Unlock()
		return next(ctx, network, addr)
	}
}

func (r *cutRig) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); r.on.Load() && (name == "eval" || name == "evalsha") {
			r.held.Add(1)
			select {
			case <-r.pass:
			case <-r.open:
			}
			r.held.Add(-1)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook puts the toxic on for the pipeline armed by
// cutNextPipeline, and takes it off once the pipeline (with any resend) is
// done.
func (r *cutRig) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.mu.Lock()
		armed := r.arm > 0
		if armed {
			if err := r.putToxic(r.arm); err != nil {
				r.mu.Unlock()
				return err
			}
			r.arm = 0
		}
		r.mu.Unlock()
		err := next(ctx, cmds)
		if armed {
			r.mu.Lock()
			r.uncut()
			r.mu.Unlock()
		}
		return err
	}
}

func (r *cutRig) openGate() {
	if r.on.Swap(false) {
		close(r.open)
	}
}

// scriptCalls returns how many EVAL and EVALSHA commands the server has run.
func (r *cutRig) scriptCalls(t *testing.T) int {
	t.Helper()
	n, err := r.srv.CommandCalls(context.Background(), "eval", "evalsha")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// reentrant acquires two holds of one owner on key: outer, then inner.
func (r *cutRig) reentrant(t *testing.T, key string) (outer, inner *lock.Lock) {
	t.Helper()
	ctx := context.Background()
	outer = r.locks.NewLock(key, lock.WithOwner("owner-"+key))
	inner = r.locks.NewLock(key, lock.WithOwner("owner-"+key))
	for _, l := range []*lock.Lock{outer, inner} {
		if err := l.Acquire(ctx); err != nil {
			t.Fatalf("Acquire() error = %v", err)
		}
	}
	return outer, inner
}

// checkUnknown checks what a release whose reply was cut reports: the
// connection's error (its outcome is unknown), not ErrNotHeld, and no loss.
func checkUnknown(t *testing.T, what string, l *lock.Lock, err error) {
	t.Helper()
	t.Logf("%s Release() with its reply cut = %v; LostErr() = %v", what, err, l.LostErr())
	if err == nil || errors.Is(err, lock.ErrNotHeld) || !isNetwork(err) {
		t.Errorf("%s Release() with its reply cut = %v, want the connection's error", what, err)
	}
	if lost := l.LostErr(); lost != nil {
		t.Errorf("%s LostErr() = %v after our own release, want nil", what, lost)
	}
}

// checkOuterHeld checks that the re-entrant outer hold on key survived its
// inner hold's release, then releases it.
func (r *cutRig) checkOuterHeld(t *testing.T, key string, outer *lock.Lock) {
	t.Helper()
	ctx := context.Background()
	other := lock.NewClient(r.admin)
	defer other.Close()
	if ok, err := other.NewLock(key, lock.WithOwner("another")).TryAcquire(ctx); ok || err != nil {
		t.Fatalf("another owner's TryAcquire() = %v, %v while the outer hold is held, want false, nil", ok, err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatalf("outer Release() error = %v", err)
	}
	if n := r.admin.Exists(ctx, "lock:{"+key+"}").Val(); n != 0 {
		t.Fatalf("key left after every hold was released")
	}
}

// TestResend_releaseReplyCut: a release whose reply is cut after Redis ran
// it is not resent. Resent, a plain release found the key gone and reported
// our own release as a loss (force-released), and a re-entrant release
// dropped a second level, freeing the owner's outer hold for another owner.
func TestResend_releaseReplyCut(t *testing.T) {
	ctx := context.Background()
	t.Run("plain", func(t *testing.T) {
		r := newCutRig(t)
		l := r.locks.NewLock("resend-plain")
		if err := l.Acquire(ctx); err != nil {
			t.Fatalf("Acquire() error = %v", err)
		}
		before := r.scriptCalls(t)
		r.cut(t, 2) // inside ":1\r\n"
		err := l.Release(ctx)
		runs := r.scriptCalls(t) - before
		figure(t, "release_reply_cut", "kind", "plain", "script_runs", runs,
			"not_held", errors.Is(err, lock.ErrNotHeld), "lost", l.LostErr() != nil)
		if runs != 1 {
			t.Errorf("Redis ran the release %d times, want 1", runs)
		}
		checkUnknown(t, "plain", l, err)
		if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) || l.LostErr() != nil {
			t.Errorf("second Release() = %v, LostErr() = %v; want ErrNotHeld and no loss", err, l.LostErr())
		}
	})
	t.Run("reentrant", func(t *testing.T) {
		r := newCutRig(t)
		outer, inner := r.reentrant(t, "resend-reentrant")
		before := r.scriptCalls(t)
		r.cut(t, 2) // inside ":2\r\n"
		err := inner.Release(ctx)
		runs := r.scriptCalls(t) - before
		figure(t, "release_reply_cut", "kind", "reentrant", "script_runs", runs,
			"outer_lost", outer.LostErr() != nil)
		if runs != 1 {
			t.Errorf("Redis ran the release %d times, want 1", runs)
		}
		checkUnknown(t, "inner", inner, err)
		r.checkOuterHeld(t, "resend-reentrant", outer)
	})
}

// TestResend_pipelineReplyCut: a coalesced pipeline carrying a plain release
// and a re-entrant inner release, cut inside the second reply, is not
// resent. go-redis resent such a pipeline whole: the plain release, whose
// own reply had arrived intact, ran again and reported our release as a
// loss, and the inner release dropped a second level, freeing the owner's
// outer hold.
func TestResend_pipelineReplyCut(t *testing.T) {
	ctx := context.Background()
	r := newCutRig(t)
	plain := r.locks.NewLock("resend-pipe-plain")
	if err := plain.Acquire(ctx); err != nil {
		t.Fatalf("Acquire() error = %v", err)
	}
	outer, inner := r.reentrant(t, "resend-pipe-reentrant")
	filler := r.locks.NewLock("resend-pipe-filler")
	if err := filler.Acquire(ctx); err != nil {
		t.Fatalf("filler Acquire() error = %v", err)
	}

	// Hold every send slot of the coalescer (max(2, GOMAXPROCS)) with a
	// call at the gate, so that both releases queue behind them.
	r.on.Store(true)
	limit := max(2, runtime.GOMAXPROCS(0))
	fillers := make(chan error, limit)
	for range limit {
		go func() {
			_, err := filler.TTL(ctx)
			fillers <- err
		}()
	}
	if !waitFor(t, 10*time.Second, func() bool { return int(r.held.Load()) == limit }) {
		t.Fatalf("%d fillers at the gate, want %d", r.held.Load(), limit)
	}
	type result struct {
		name string
		err  error
	}
	results := make(chan result, 2)
	go func() { results <- result{"plain", plain.Release(ctx)} }()
	go func() { results <- result{"inner", inner.Release(ctx)} }()
	if !waitFor(t, 10*time.Second, func() bool { return queuedCalls() == 2 }) {
		t.Fatalf("%d calls queued in the coalescer, want the 2 releases", queuedCalls())
	}

	before := r.scriptCalls(t)
	// Both replies are 4 bytes (":1\r\n", ":2\r\n"): whichever comes first
	// arrives whole, and the cut falls inside the second.
	r.mu.Lock()
	r.arm = 4 + 2
	r.mu.Unlock()
	r.pass <- struct{}{} // one filler returns; its slot sends the queue
	errs := map[string]error{}
	for range 2 {
		res := <-results
		errs[res.name] = res.err
	}
	runs := r.scriptCalls(t) - before - 1 // less the filler's
	r.openGate()
	for range limit {
		if err := <-fillers; err != nil {
			t.Errorf("filler TTL() error = %v", err)
		}
	}
	figure(t, "pipeline_reply_cut", "script_runs", runs,
		"plain_not_held", errors.Is(errs["plain"], lock.ErrNotHeld), "plain_lost", plain.LostErr() != nil,
		"inner_err", errs["inner"] != nil)
	if runs != 2 {
		t.Errorf("Redis ran %d scripts for a pipeline of 2: it was resent", runs)
	}
	checkUnknown(t, "plain", plain, errs["plain"])
	checkUnknown(t, "inner", inner, errs["inner"])
	r.checkOuterHeld(t, "resend-pipe-reentrant", outer)
}

// queuedCalls counts the goroutines waiting in a lock Client's coalescer
// queue for their call to be sent. This module cannot see the queue itself;
// the goroutine dump can: a queued call is parked in coalescer.do's select.
func queuedCalls() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		lines := strings.SplitN(g, "\n", 3)
		if len(lines) >= 2 && strings.Contains(lines[0], "[select") &&
			strings.HasPrefix(lines[1], "github.com/agentlock/lock.(*coalescer).do(") {
			count++
		}
	}
	return count
}
