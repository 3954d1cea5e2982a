package faulttest

import (
	"cmp"
	"context"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestProcess_fairHolderKilled: TestProcess_holderKilled on a fair lock,
// whose waiter here waits in the key's queue.
func TestProcess_fairHolderKilled(t *testing.T) {
	holderKilled(t, "fair_holder_killed", fairKind("fair-killed"))
}

// TestProcess_fairHolderPaused: TestProcess_holderPaused on a fair lock.
func TestProcess_fairHolderPaused(t *testing.T) {
	holderPaused(t, "fair_holder_paused", fairKind("fair-paused"))
}

// fairDone is a fair waiter's report once it held the key and let it go.
type fairDone struct {
	Fence  int64 `json:"fence"`
	HeldNS int64 `json:"held_ns"` // when its Acquire returned
}

// fairWaitWorker waits for the fair lock of FT_KEY (TTL FT_TTL_MS), makes
// its fenced write, releases, and reports "done"; the hold is in its
// history.
func fairWaitWorker() error {
	c, ref, done, err := dialWorker()
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key, hist, me := os.Getenv("FT_KEY"), os.Getenv(histEnv), workerClient(os.Getpid())
	l := c.NewLock(key, lock.WithFair(true))
	call := now()
	if err := l.Acquire(ctx); err != nil {
		return err
	}
	held := now()
	if err := appendHistory(hist, acquireOps(l, me, holdExclusive, call, held)...); err != nil {
		return err
	}
	if err := enterAll(ref, l); err != nil {
		return err
	}
	wcall := now()
	ok, err := ref.write(key, l.Fence())
	if err != nil {
		return err
	}
	if err := appendHistory(hist, histOp{Op: 'W', Key: key, Client: me, Fence: l.Fence(), OK: ok, Call: wcall, Ret: now()}); err != nil {
		return err
	}
	if err := ref.exit(key); err != nil {
		return err
	}
	call = now()
	err = l.Release(ctx)
	if err := appendHistory(hist, endOps(l, me, call, now())...); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	report("done", fairDone{Fence: l.Fence(), HeldNS: held})
	return nil
}

// fairRig is a fair lock held here with fair waiters queued behind it in
// worker processes.
type fairRig struct {
	t    *testing.T
	s    *redistest.Server
	ref  *referee
	hist *history
	key  string
	ttl  time.Duration
	here *lock.Lock
}

func newFairRig(t *testing.T, key string, ttl time.Duration) *fairRig {
	r := &fairRig{t: t, s: redistest.Start(t, redistest.Config{}), ref: startReferee(t), hist: newHistory(t), key: key, ttl: ttl}
	locks := lock.NewClient(r.s.Client(t), lock.WithTTL(ttl))
	t.Cleanup(func() { locks.Close() })
	r.here = locks.NewLock(key, lock.WithFair(true))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.hist.acquire(ctx, r.here, "here", holdExclusive); err != nil {
		t.Fatalf("Acquire() error = %v", err)
	}
	return r
}

// queue starts a fair waiter process and returns once the queue has grown
// by it, so waiters queue in the order queue is called.
func (r *fairRig) queue() *worker {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before, err := r.here.Waiters(ctx)
	if err != nil {
		r.t.Fatalf("Waiters() error = %v", err)
	}
	w := startWorker(r.t, "fairwait", "FT_REDIS="+r.s.Addr(), "FT_REFEREE="+r.ref.addr(), r.hist.workerEnv(),
		"FT_KEY="+r.key, "FT_TTL_MS="+strconv.Itoa(int(r.ttl.Milliseconds())))
	for {
		n, err := r.here.Waiters(ctx)
		if err != nil {
			r.t.Fatalf("Waiters() error = %v", err)
		}
		if n > before {
			return w
		}
		select {
		case <-w.done:
			r.t.Fatalf("fair waiter %d exited before queueing: %v\n%s", w.pid(), w.err, w.stderrTail())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// release lets the key go from here, handing it to the queue's head.
func (r *fairRig) release() {
	r.t.Helper()
	if err := r.hist.release(context.Background(), r.here, "here"); err != nil {
		r.t.Fatalf("Release() error = %v", err)
	}
}

// done waits for w's report and its exit.
func (r *fairRig) done(w *worker) fairDone {
	r.t.Helper()
	var d fairDone
	w.expect("done", &d, 30*time.Second)
	if err := w.wait(10 * time.Second); err != nil {
		r.t.Errorf("fair waiter %d: %v", w.pid(), err)
	}
	return d
}

// TestFair_arrivalOrderAcrossProcesses queues fair waiters in four worker
// processes, one after another behind a hold here, with no fault: they
// must get the key in the order they queued, and the history (each hold,
// its fenced write, its release) must be linearizable.
func TestFair_arrivalOrderAcrossProcesses(t *testing.T) {
	const waiters = 4
	r := newFairRig(t, "fair-fifo", 2*time.Second)
	var arrived []string
	var ws []*worker
	for range waiters {
		w := r.queue()
		ws = append(ws, w)
		arrived = append(arrived, workerClient(w.pid()))
	}
	released := now()
	r.release()
	var last int64
	for _, w := range ws {
		last = max(last, r.done(w).HeldNS)
	}
	ops := r.hist.all(t)
	var got []string // the holders after here, in fence order
	acquires := slices.DeleteFunc(slices.Clone(ops), func(o histOp) bool { return o.Op != 'A' || o.Client == "here" })
	slices.SortFunc(acquires, func(a, b histOp) int { return cmp.Compare(a.Fence, b.Fence) })
	for _, o := range acquires {
		got = append(got, o.Client)
	}
	nops, took := checkLinearizable(t, ops, 1)
	st := r.ref.stats()
	figure(t, "fair_fifo", "waiters", waiters, "in_order", slices.Equal(got, arrived),
		"all_served_after_release_ms", time.Duration(last-released).Milliseconds(),
		"overlaps", st.Overlaps, "stale_accepted", st.StaleAccepted, "history_ops", nops, "porcupine_ms", took.Milliseconds())
	if !slices.Equal(got, arrived) {
		t.Errorf("holders in fence order %v, want the arrival order %v", got, arrived)
	}
	if st.Overlaps != 0 || st.Rejected != 0 {
		t.Errorf("referee: %d overlaps, %d writes rejected; want 0 and 0", st.Overlaps, st.Rejected)
	}
}

// TestProcess_fairWaiterKilled SIGKILLs the head of a fair lock's queue,
// a waiter in a worker process, with another waiter queued behind it, and
// measures when the queue moves on to the live one (no time is asserted:
// the figures go to docs/design/fault-figures.md). entryExpires keeps the key here until the
// dead waiter's place has expired (FairEntryTimeout after its last
// attempt), then releases; deadHeadHanded releases at once, handing the
// key to the dead head, which keeps it for its TTL as a dead holder would.
func TestProcess_fairWaiterKilled(t *testing.T) {
	for _, tc := range []struct {
		name        string
		waitOutDead bool
	}{{"entryExpires", true}, {"deadHeadHanded", false}} {
		t.Run(tc.name, func(t *testing.T) {
			const ttl = time.Second
			r := newFairRig(t, "fair-waiter-killed-"+tc.name, ttl)
			dead := r.queue()
			live := r.queue()
			if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("SIGKILL waiter: %v", err)
			}
			killed := time.Now()
			_ = dead.wait(5 * time.Second)
			var left time.Duration // until the dead entry left the queue
			if tc.waitOutDead {
				ctx, cancel := context.WithTimeout(context.Background(), 10*lock.FairEntryTimeout(lock.DefaultBackoffMax))
				defer cancel()
				for {
					n, err := r.here.Waiters(ctx)
					if err != nil {
						t.Fatalf("Waiters() with the dead entry queued: %v", err)
					}
					if n < 2 {
						left = time.Since(killed)
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			r.release()
			d := r.done(live)
			nops, took := checkLinearizable(t, r.hist.all(t), 1)
			skipped := d.Fence - r.here.Fence() - 1 // fences handed to the dead head
			st := r.ref.stats()
			figure(t, "fair_waiter_killed_"+tc.name, "ttl_ms", ttl.Milliseconds(),
				"entry_timeout_ms", lock.FairEntryTimeout(lock.DefaultBackoffMax).Milliseconds(),
				"dead_entry_left_after_ms", left.Milliseconds(),
				"next_held_after_kill_ms", time.Duration(d.HeldNS-killed.UnixNano()).Milliseconds(),
				"fences_to_dead_head", skipped, "stale_accepted", st.StaleAccepted,
				"history_ops", nops, "porcupine_ms", took.Milliseconds())
			if d.Fence <= r.here.Fence() {
				t.Errorf("live waiter's fence %d, want above %d", d.Fence, r.here.Fence())
			}
			if st.Overlaps != 0 {
				t.Errorf("referee overlaps = %d, want 0", st.Overlaps)
			}
		})
	}
}

// TestNetwork_fairPartition: TestNetwork_faults' partition on a fair lock.
// The Client cut off by toxiproxy holds the key, renewing, when the cut
// comes; the other Client's fair waiters, queued behind it, get the key
// once the cut-off hold has expired. Holds never overlap, fences rise in
// hold order, the fenced store takes no stale write, and the healed
// Client holds the key again.
func TestNetwork_fairPartition(t *testing.T) {
	const ttl = time.Second
	networkFault(t, "network_fair_partitionThenHeal", ttl, partition(2*ttl+500*time.Millisecond), lock.WithFair(true))
}
