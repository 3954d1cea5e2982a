package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// gateHook holds every single-command call at a gate until it opens and
// records how many EVALSHA calls each pipeline carries, so a test can pile
// calls up behind the coalescer's sends and see how they go out. (go-redis
// sends a new connection's handshake as a pipeline; EVAL replays after
// NOSCRIPT are not counted either.)
type gateHook struct {
	open    chan struct{}
	mu      sync.Mutex
	pipes   []int
	keys    [][]string // by pipeline: the first key of each EVALSHA
	waiting int        // single calls held at the gate now
}

func newGateHook() *gateHook { return &gateHook{open: make(chan struct{})} }

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.waiting++
		h.mu.Unlock()
		<-h.open
		h.mu.Lock()
		h.waiting--
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var keys []string
		for _, c := range cmds {
			if c.Name() == "evalsha" {
				keys = append(keys, fmt.Sprint(c.Args()[3]))
			}
		}
		if len(keys) > 0 {
			h.mu.Lock()
			h.pipes = append(h.pipes, len(keys))
			h.keys = append(h.keys, keys)
			h.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

func (h *gateHook) pipelines() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.pipes)
}

// waitLoad waits until the Client's coalescers have n calls out or queued,
// and returns the lengths of the queues that are not empty.
func waitLoad(t *testing.T, c *lock.Client, n int) (out int, queues []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, queued, queues := lock.CoalescerLoad(c)
		if out+queued == n {
			return out, queues
		}
		if time.Now().After(deadline) {
			t.Fatalf("coalescer has %d out and %d queued, want %d in all", out, queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCoalescing piles acquires up behind the coalescer's sends and checks
// that every queued call goes out in one pipeline (two past maxBatch), that
// each gets its own correct reply, and that pipelined EVALSHA calls meeting
// an emptied script cache are replayed by EVAL.
func TestCoalescing(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		for _, n := range []int{24, 300} {
			t.Run(fmt.Sprint(n), func(t *testing.T) {
				rdb, c := warmClient(t, tg)
				// Empty the script cache: the pipelined EVALSHAs below meet
				// NOSCRIPT.
				must(t, "SCRIPT FLUSH", rdb.ScriptFlush(context.Background()).Err())
				pileUp(t, rdb, c, n)
			})
		}
	})
}

// TestClusterCoalescing: on a real 3-master Redis Cluster a pipeline of
// queued calls is split by node (each new to the script after the first,
// so replayed by EVAL) and every call gets its own reply.
func TestClusterCoalescing(t *testing.T) {
	rdb := redistest.StartCluster(t, 3, 0).Client(t)
	c := newClient(t, rdb)
	warm := c.NewLock(keyFor(t) + ":warm")
	must(t, "warm-up TryAcquire()", tryOK(context.Background(), warm))
	must(t, "warm-up Release()", warm.Release(context.Background()))
	h, queues := pileUp(t, rdb, c, 48)
	if len(queues) != 3 {
		t.Fatalf("queues %v: want one per master", queues)
	}
	for i, keys := range h.keys {
		nodes := map[string]bool{}
		for _, k := range keys {
			node, err := rdb.MasterForKey(context.Background(), k)
			must(t, "MasterForKey()", err)
			nodes[node.Options().Addr] = true
		}
		if len(nodes) != 1 {
			t.Fatalf("pipeline %d went to %d masters, want 1", i, len(nodes))
		}
	}
}

// pileUp starts n TryAcquires on distinct keys while every single call is
// held at a gate, opens it once all n are out or queued, and checks that
// the queue went out in pipelines of at most 256 and that each lock holds
// its own token. It returns the hook and the queues' lengths.
func pileUp(t *testing.T, rdb redis.UniversalClient, c *lock.Client, n int) (*gateHook, []int) {
	t.Helper()
	ctx := context.Background()
	h := newGateHook()
	rdb.AddHook(h)
	locks := make([]*lock.Lock, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		locks[i] = c.NewLock(fmt.Sprintf("%s:%d", keyFor(t), i))
		wg.Go(func() { errs[i] = tryOK(ctx, locks[i]) })
	}
	out, queues := waitLoad(t, c, n)
	close(h.open)
	wg.Wait()
	for i, err := range errs {
		must(t, fmt.Sprintf("TryAcquire(%d)", i), err)
	}
	// Each queue (one per node on a cluster) goes out when the first send
	// of its lane returns, in chunks of at most 256; each call meeting
	// NOSCRIPT is then replayed by EVAL.
	var want []int
	for _, q := range queues {
		for left := q; left > 0; left -= min(left, 256) {
			want = append(want, min(left, 256))
		}
	}
	pipes := h.pipelines()
	slices.Sort(pipes)
	slices.Sort(want)
	if !slices.Equal(pipes, want) {
		t.Fatalf("%d out, queues %v: pipelines %v, want %v", out, queues, pipes, want)
	}
	for i, l := range locks {
		got, err := rdb.Get(ctx, lockKey(l.Key())).Result()
		if err != nil || got != l.Token() {
			t.Fatalf("lock %d holds %q, %v; want its token %q", i, got, err, l.Token())
		}
		must(t, fmt.Sprintf("Release(%d)", i), l.Release(ctx))
	}
	return h, queues
}

// warmClient returns a new go-redis client and a lock Client over it that
// has acquired and released once: the scripts have been sent whole, and no
// hold is left for the renewal loop.
func warmClient(t *testing.T, tg *target) (*redis.Client, *lock.Client) {
	t.Helper()
	ctx := context.Background()
	rdb := tg.newRDB(t)
	c := newClient(t, rdb)
	warm := c.NewLock(keyFor(t) + ":warm")
	must(t, "warm-up TryAcquire()", tryOK(ctx, warm))
	must(t, "warm-up Release()", warm.Release(ctx))
	return rdb, c
}

// tryOK is TryAcquire that counts a lock held by someone else as an error.
func tryOK(ctx context.Context, l *lock.Lock) error {
	ok, err := l.TryAcquire(ctx)
	if err == nil && !ok {
		err = errors.New("not acquired")
	}
	return err
}

// TestCoalescingOff: with WithCoalescing(false), on the Client or on one
// lock, every call goes out on its own at once, however many are out.
func TestCoalescingOff(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		for _, perLock := range []bool{false, true} {
			t.Run(fmt.Sprintf("perLock=%v", perLock), func(t *testing.T) {
				ctx := context.Background()
				rdb := tg.newRDB(t)
				var c *lock.Client
				var opts []lock.Option
				if perLock {
					c = newClient(t, rdb)
					opts = append(opts, lock.WithCoalescing(false))
				} else {
					c = newClient(t, rdb, lock.WithCoalescing(false))
				}
				h := newGateHook()
				rdb.AddHook(h)
				const n = 16
				var wg sync.WaitGroup
				errs := make([]error, n)
				for i := range n {
					l := c.NewLock(fmt.Sprintf("%s:%d", keyFor(t), i), opts...)
					wg.Go(func() { errs[i] = tryOK(ctx, l) })
				}
				deadline := time.Now().Add(10 * time.Second)
				for {
					h.mu.Lock()
					waiting := h.waiting
					h.mu.Unlock()
					if waiting == n {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%d calls at the gate, want all %d sent at once", waiting, n)
					}
					time.Sleep(time.Millisecond)
				}
				close(h.open)
				wg.Wait()
				for i, err := range errs {
					must(t, fmt.Sprintf("TryAcquire(%d)", i), err)
				}
				if pipes := h.pipelines(); len(pipes) != 0 {
					t.Fatalf("pipelines %v, want none", pipes)
				}
			})
		}
	})
}

// TestCoalescingQueuedCancel: a call whose ctx ends while it waits in the
// queue returns at once with ctx's cause, and is never sent.
func TestCoalescingQueuedCancel(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		rdb, c := warmClient(t, tg)
		h := newGateHook()
		rdb.AddHook(h)

		// Fill every send slot with calls held at the gate, and queue one.
		var wg sync.WaitGroup
		out := 0
		for n := 0; ; n++ {
			wg.Go(func() { _ = tryOK(ctx, c.NewLock(fmt.Sprintf("%s:%d", keyFor(t), n))) })
			o, q := waitLoad(t, c, n+1)
			if len(q) > 0 {
				out = o
				break
			}
		}

		cause := errors.New("caller gave up")
		cctx, cancel := context.WithCancelCause(ctx)
		l := c.NewLock(keyFor(t) + ":cancelled")
		done := make(chan error, 1)
		go func() {
			ok, err := l.TryAcquire(cctx)
			if ok {
				err = errors.New("acquired")
			}
			done <- err
		}()
		waitLoad(t, c, out+2)
		cancel(cause)
		var err error
		select {
		case err = <-done:
		case <-time.After(3 * time.Second):
			// An undo of the unsent call would wait in the queue for its
			// own timeout (5s): nothing must be sent for a call never sent.
			t.Fatal("TryAcquire did not return within 3s of its ctx's end while every send was held")
		}
		if !errors.Is(err, cause) {
			t.Fatalf("TryAcquire with a cancelled ctx = %v, want %v", err, cause)
		}
		if _, q, _ := lock.CoalescerLoad(c); q != 1 {
			t.Fatalf("%d calls queued after the cancelled one left, want 1", q)
		}
		close(h.open)
		wg.Wait()
		// Only the other queued call went out: the cancelled one was not
		// sent, nor was an undo of it.
		if pipes := h.pipelines(); !slices.Equal(pipes, []int{1}) {
			t.Fatalf("pipelines %v, want [1]", pipes)
		}
		if n, err := rdb.Exists(ctx, lockKey(l.Key())).Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS of the cancelled lock = %d, %v; want 0", n, err)
		}
	})
}
