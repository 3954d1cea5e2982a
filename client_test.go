package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestClient_Close_holdsLostByDeadlineWhileARenewalHangs: Close waits for
// the renewal calls in flight, which go-redis gives up only at its read or
// dial timeout (with the default options and one master of a cluster
// stopped, Close took 4.7s). Meanwhile the holds on the healthy masters are
// no longer renewed; Close's contract is that their Lost() closes at their
// safety deadlines, before Redis lets their keys go. Here one master is
// SIGSTOPped and the renewal call to it is kept from returning until the
// test ends; another client then takes each healthy master's key as soon as
// it expires, and the first holder's Lost() must already be closed.
func TestClient_Close_holdsLostByDeadlineWhileARenewalHangs(t *testing.T) {
	t.Parallel()
	const ttl = 1500 * time.Millisecond
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3, 0, "--cluster-require-full-coverage", "no")
	rdb := redis.NewClusterClient(cl.ClusterOptions())
	t.Cleanup(func() { rdb.Close() })
	c := lock.NewClient(rdb)

	// One hold on each master; the first one's master is stopped.
	var holds []*lock.Lock
	var masters []*redistest.Server
	for srv, ls := range holdsPerMaster(t, cl, c, 1, ttl) {
		holds, masters = append(holds, ls[0]), append(masters, srv)
	}
	stalled := masters[0]
	// Another client, its slot map and command table loaded before the
	// stop, so that it reaches the healthy masters at once.
	other, orb := newClient(t, cl.Client(t)), cl.Client(t)
	for _, l := range holds {
		if ok, err := other.NewLock(l.Key()).TryAcquire(ctx); ok || err != nil {
			t.Fatalf("other client's TryAcquire() = %v, %v, want false", ok, err)
		}
	}
	hang := &hangPipeline{key: lockKey(holds[0].Key()), out: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(hang)
	must(t, "SIGSTOP", stalled.Pause())
	closing, closed := false, make(chan struct{})
	t.Cleanup(func() {
		_ = stalled.Resume()
		hang.open()
		if closing {
			<-closed
		} else {
			c.Close()
		}
	})
	select {
	case <-hang.out:
	case <-time.After(ttl):
		t.Fatalf("no renewal to the stopped master within the TTL %v", ttl)
	}
	closing = true
	go func() {
		defer close(closed)
		c.Close()
	}()

	for i, l := range holds[1:] {
		takeOver(t, other, orb, l, 10*time.Second,
			fmt.Sprintf("Close() is waiting for the renewal call to stopped master %s; hold on healthy master %s",
				stalled.Addr(), masters[i+1].Addr()))
	}
}

// hangPipeline is a go-redis hook that keeps the first pipeline carrying key
// from returning until open is called, whatever its context says, as
// go-redis does until its read or dial timeout with a server that does not
// answer.
type hangPipeline struct {
	key     string
	out     chan struct{} // closed when that pipeline is sent
	release chan struct{}
	once    sync.Once
	hung    sync.Once
}

func (h *hangPipeline) open() { h.once.Do(func() { close(h.release) }) }

func (h *hangPipeline) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *hangPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *hangPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		hang := false
		for _, cmd := range cmds {
			if a := cmd.Args(); len(a) > 3 && fmt.Sprint(a[3]) == h.key {
				h.hung.Do(func() { hang = true })
				break
			}
		}
		if !hang {
			return next(ctx, cmds)
		}
		close(h.out)
		err := next(ctx, cmds)
		<-h.release
		return err
	}
}

// TestClient_Close_verbsAfterClose: Release still deletes a hold after
// Close, Extend and the acquiring verbs say ErrClosed, and an unrenewed
// hold's Lost() closes no later than its deadline.
func TestClient_Close_verbsAfterClose(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := lock.NewClient(tg.rdb)
		key := keyFor(t)
		a := c.NewLock(key, lock.WithTTL(time.Minute))
		b := c.NewLock(key+"b", lock.WithTTL(300*time.Millisecond))
		must(t, "a.Acquire()", a.Acquire(ctx))
		must(t, "b.Acquire()", b.Acquire(ctx))
		must(t, "Close()", c.Close())
		wantErr(t, "Extend() after Close", a.Extend(ctx, time.Minute), lock.ErrClosed)
		if ok, err := c.NewLock(key + "c").TryAcquire(ctx); ok || !errors.Is(err, lock.ErrClosed) {
			t.Fatalf("TryAcquire() after Close = %v, %v", ok, err)
		}
		wantErr(t, "WithLock() after Close", c.WithLock(ctx, key+"d", func(context.Context) error { return nil }), lock.ErrClosed)
		must(t, "Release() after Close", a.Release(ctx))
		if tg.rdb.Exists(ctx, lockKey(key)).Val() != 0 {
			t.Fatal("Release after Close left the key")
		}
		if isClosed(a.Lost()) {
			t.Fatal("Release after Close closed Lost()")
		}
		waitClosed(t, b.Lost(), 5*time.Second, "unrenewed hold's Lost() after Close")
		if !errors.Is(b.LostErr(), lock.ErrLockLost) {
			t.Fatalf("LostErr() = %v, want ErrLockLost", b.LostErr())
		}
	})
}

// TestClient_Close_racingAcquirers: Close while many Acquire, TryAcquire
// and waiters run: each returns nil, ErrClosed or ErrNotAcquired, nothing
// panics or races, and (by goleak in TestMain) nothing is left running.
func TestClient_Close_racingAcquirers(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	ctx := context.Background()
	for round := range 5 {
		c := lock.NewClient(tg.rdb, lock.WithTTL(time.Second), lock.WithBackoff(time.Millisecond, 5*time.Millisecond))
		key := keyFor(t) + string(rune('a'+round))
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		var mu sync.Mutex
		var held []*lock.Lock
		for i := range 40 {
			wg.Go(func() {
				l := c.NewLock(key + string(rune('0'+i%4)))
				var err error
				if i%2 == 0 {
					err = l.Acquire(ctx)
				} else {
					var ok bool
					ok, err = l.TryAcquire(ctx)
					if !ok && err == nil {
						return
					}
				}
				if err == nil {
					mu.Lock()
					held = append(held, l)
					mu.Unlock()
					return
				}
				errs <- err
			})
		}
		time.Sleep(time.Duration(round) * time.Millisecond)
		must(t, "Close()", c.Close())
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, lock.ErrClosed) && !errors.Is(err, lock.ErrNotAcquired) {
				t.Fatalf("acquire racing Close = %v, want ErrClosed or ErrNotAcquired", err)
			}
		}
		for _, l := range held {
			if err := l.Release(ctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Release() after Close = %v", err)
			}
		}
	}
}

// TestClient_Close_racingFirstAcquire: Close racing the Client's first
// hold, which starts the renewal loop, neither races (run with -race) nor
// panics.
func TestClient_Close_racingFirstAcquire(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	for round := range 200 {
		c := lock.NewClient(tg.rdb)
		l := c.NewLock(key)
		done := make(chan bool)
		go func() {
			ok, _ := l.TryAcquire(ctx)
			done <- ok
		}()
		time.Sleep(time.Duration(round%20) * 20 * time.Microsecond)
		c.Close()
		if <-done {
			_ = l.Release(ctx)
		}
	}
}
