package lock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
)

// heldScript holds the nth script call that names a key holding tag,
// counted once armed (alone or in a pipeline; pipelines only with
// pipelines): before it is sent or, with after, once its reply came, until
// let. replied runs when that call has its reply and is let go, before the
// reply reaches the caller.
type heldScript struct {
	tag       string
	n         int
	after     bool
	pipelines bool
	replied   func()

	armed    atomic.Bool
	mu       sync.Mutex
	seen     int
	held     chan struct{}
	release  chan struct{}
	answered chan struct{} // closed once replied has run
	once     sync.Once
}

func newHeldScript(t *testing.T, tag string, n int, after, pipelines bool, replied func()) *heldScript {
	h := &heldScript{tag: tag, n: n, after: after, pipelines: pipelines, replied: replied,
		held: make(chan struct{}), release: make(chan struct{}), answered: make(chan struct{})}
	t.Cleanup(h.let) // also when the test fails: the held call must end
	return h
}

func (h *heldScript) let() { h.once.Do(func() { close(h.release) }) }

// hit reports whether cmds carry the nth script call.
func (h *heldScript) hit(cmds []redis.Cmder) bool {
	if !h.armed.Load() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	hit := false
	for _, c := range cmds {
		for _, k := range kindtest.ScriptKeys(c) {
			if strings.Contains(k, h.tag) {
				h.seen++
				hit = hit || h.seen == h.n
				break
			}
		}
	}
	return hit
}

// around sends cmds with send, holding them if they are the nth.
func (h *heldScript) around(cmds []redis.Cmder, send func() error) error {
	if !h.hit(cmds) {
		return send()
	}
	var err error
	if h.after {
		err = send()
	}
	close(h.held)
	<-h.release
	if !h.after {
		err = send()
	}
	h.replied()
	close(h.answered)
	return err
}

func (h *heldScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *heldScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.pipelines {
			return next(ctx, cmd)
		}
		return h.around([]redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

func (h *heldScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.around(cmds, func() error { return next(ctx, cmds) })
	}
}

// renewalVsExtend is one run of a renewal out while Extend(extendedTTL)
// runs: the renewal, held by hold, is let go once the Extend has returned
// or waits for it. left reads the hold's TTL in Redis (through a client
// without the hook).
type renewalVsExtend struct {
	hold     *heldScript
	left     func() time.Duration
	extended atomic.Bool // the Extend has returned
	mu       sync.Mutex
	late     []time.Duration // TTLs left in Redis when the renewal's reply came after the Extend returned
}

// sample, the hook's replied, records what the renewal left in Redis if
// the Extend has returned already.
func (r *renewalVsExtend) sample() {
	if !r.extended.Load() {
		return
	}
	d := r.left()
	r.mu.Lock()
	r.late = append(r.late, d)
	r.mu.Unlock()
}

// run extends with extend once the renewal is held, and lets the renewal go
// once the Extend returned or waits for it (waiting); it returns once the
// Extend has, and checks that no TTL below lateFloor was found in Redis
// once it had returned.
func (r *renewalVsExtend) run(t *testing.T, extend func(context.Context, time.Duration) error, waiting <-chan struct{}) {
	t.Helper()
	select {
	case <-r.hold.held:
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal of the hold within 10s")
	}
	done := make(chan error, 1)
	go func() {
		err := extend(context.Background(), extendedTTL)
		r.extended.Store(true)
		done <- err
	}()
	var err error
	select {
	case err = <-done: // the Extend went through with the renewal out
		r.hold.let()
	case <-waiting:
		r.hold.let()
		err = <-done
	}
	must(t, "Extend()", err)
	if d := r.left(); d < lateFloor {
		t.Fatalf("TTL in Redis = %v after Extend(%v) returned, want at least %v", d, extendedTTL, lateFloor)
	}
	select {
	case <-r.hold.answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the renewal let go got no reply within 10s")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.late {
		if d < lateFloor {
			t.Fatalf("TTL in Redis = %v when a renewal sent before Extend(%v) was answered after it returned: the renewal undid the Extend", d, extendedTTL)
		}
	}
}

// waitSignal returns a channel closed by the first call of the func.
func waitSignal() (<-chan struct{}, func()) {
	ch := make(chan struct{})
	var once sync.Once
	return ch, func() { once.Do(func() { close(ch) }) }
}

// TestExtend_checkRenewalOutKeepsTheExtendedTTL: a Client's first hold is
// asked about in Redis by a renewal once its force channel is confirmed.
// That renewal carries the acquire's TTL; held before it is sent, or with
// its reply held, while Extend to a longer TTL runs, it must not leave the
// acquire's TTL in Redis after the Extend returned, the watchdog off too:
// the Extend waits for it. The hold is not lost.
func TestExtend_checkRenewalOutKeepsTheExtendedTTL(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	// Load every script the test sends, so that none is replayed after a
	// NOSCRIPT and the count of calls on the key is the acquire, then the
	// check.
	rec := &kindtest.Recorder{Renewals: true}
	other := newClient(t, tg.newRDB(t), lock.WithObserver(rec))
	warmUp(t, other, rec)
	warm := other.NewLock(keyFor(t) + ":scripts")
	must(t, "warm-up Acquire()", warm.Acquire(ctx))
	must(t, "warm-up Extend()", warm.Extend(ctx, extendedTTL))
	must(t, "warm-up Release()", warm.Release(ctx))

	for _, watchdog := range []bool{false, true} {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("watchdog=%v/replyHeld=%v", watchdog, after), func(t *testing.T) {
				key := keyFor(t)
				rdb := tg.newRDB(t)
				r := &renewalVsExtend{left: func() time.Duration { return tg.rdb.PTTL(ctx, lockKey(key)).Val() }}
				r.hold = newHeldScript(t, lockKey(key), 2, after, false, r.sample)
				r.hold.armed.Store(true)
				rdb.AddHook(r.hold)
				c := newClient(t, rdb, lock.WithTTL(acquireTTL), lock.WithWatchdog(watchdog))
				waiting, signal := waitSignal()
				lock.OnExtendWaits(c, signal)
				l := c.NewLock(key)
				must(t, "Acquire()", l.Acquire(ctx))
				r.run(t, l.Extend, waiting)
				if err := l.LostErr(); err != nil {
					t.Fatalf("LostErr() = %v after an Extend that Redis confirmed, want nil", err)
				}
				must(t, "Release()", l.Release(ctx))
			})
		}
	}
}

// extendable is what the kinds' holds share for this test.
type extendable interface {
	Acquire(ctx context.Context) error
	Extend(ctx context.Context, ttl time.Duration) error
	Release(ctx context.Context) error
	LostErr() error
}

// TestExtend_renewalOutKeepsTheExtendedTTL: a periodic renewal of a hold
// of each kind, held before it is sent or with its reply held while Extend
// to a longer TTL runs, leaves no shorter TTL in Redis once the Extend has
// returned, and the hold is not lost.
func TestExtend_renewalOutKeepsTheExtendedTTL(t *testing.T) {
	t.Parallel()
	kinds := []struct {
		name string
		keys func(key string) []string
		make func(c *lock.Client, key string) extendable
	}{
		{"mutex", one, func(c *lock.Client, key string) extendable { return c.NewLock(key) }},
		{"read", one, func(c *lock.Client, key string) extendable { return c.NewRWLock(key).ReadLock() }},
		{"write", one, func(c *lock.Client, key string) extendable { return c.NewRWLock(key).WriteLock() }},
		{"semaphore", one, func(c *lock.Client, key string) extendable { return c.NewSemaphore(key, 2).Permit() }},
		{"fair", one, func(c *lock.Client, key string) extendable { return c.NewLock(key, lock.WithFair(true)) }},
		{"multi", two, func(c *lock.Client, key string) extendable { return c.NewMultiLock(two(key)) }},
	}
	tg := realTarget(t)
	admin := newClient(t, tg.rdb)
	for _, k := range kinds {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/replyHeld=%v", k.name, after), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				key := keyFor(t)
				rdb := tg.newRDB(t)
				r := &renewalVsExtend{left: func() time.Duration { return leastTTL(t, admin, k.keys(key)) }}
				r.hold = newHeldScript(t, key, 1, after, true, r.sample)
				rdb.AddHook(r.hold)
				rec := &kindtest.Recorder{Renewals: true}
				c := newClient(t, rdb, lock.WithObserver(rec), lock.WithTTL(3*time.Second))
				warmUp(t, c, rec) // the Client's first hold is checked at once: not this one
				waiting, signal := waitSignal()
				lock.OnExtendWaits(c, signal)
				l := k.make(c, key)
				must(t, "Acquire()", l.Acquire(ctx))
				r.hold.armed.Store(true) // the next script pipeline on the key: its renewal, at a third of the TTL
				r.run(t, l.Extend, waiting)
				if err := l.LostErr(); err != nil {
					t.Fatalf("LostErr() = %v after an Extend that Redis confirmed, want nil", err)
				}
				must(t, "Release()", l.Release(ctx))
			})
		}
	}
}

func one(key string) []string { return []string{key} }
func two(key string) []string { return []string{key + ":a", key + ":b"} }

// leastTTL is the shortest TTL left of the holders of keys, as Inspect
// shows them.
func leastTTL(t *testing.T, c *lock.Client, keys []string) time.Duration {
	least := time.Duration(-1)
	for _, key := range keys {
		info, err := c.Inspect(context.Background(), key)
		if err != nil || len(info.Holders) == 0 {
			t.Errorf("Inspect(%q) = %+v, %v; want a holder", key, info, err)
			return 0
		}
		for _, h := range info.Holders {
			if least < 0 || h.TTL < least {
				least = h.TTL
			}
		}
	}
	return least
}
