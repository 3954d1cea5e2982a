package faulttest

import (
	"context"
	"strconv"
	"testing"
	"time"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestProcess_fairHolderPartitioned cuts a worker process holding a fair
// lock off from Redis (toxiproxy, both directions) while a fair waiter
// here is queued: the worker's Lost() must close before the waiter holds
// the key, and its late write, made while still cut off (the referee is
// not behind the proxy), must be rejected.
func TestProcess_fairHolderPartitioned(t *testing.T) {
	holderPartitioned(t, "fair_holder_partitioned", fairKind("fair-cut"))
}

// TestProcess_multiHolderPartitioned: TestProcess_fairHolderPartitioned on
// a multi-lock over three keys.
func TestProcess_multiHolderPartitioned(t *testing.T) {
	holderPartitioned(t, "multi_holder_partitioned", multiKind("mc-a", "mc-b", "mc-c"))
}

// holderPartitioned runs a hold worker of kind k through a toxiproxy proxy,
// cuts it off while it holds, takes the lock here once its hold expired,
// and has the worker make its late write; the worker's hold ends in the
// history when its Lost() closed, as the library promises, and porcupine
// checks that promise with the rest.
func holderPartitioned(t *testing.T, scenario string, k holdKind) {
	const ttl = time.Second
	s := redistest.Start(t, redistest.Config{})
	p := startProxy(t, s.Addr())
	ref := startReferee(t)
	hist := newHistory(t)
	w := startWorker(t, "hold", append([]string{"FT_REDIS=" + p.Listen, "FT_REFEREE=" + ref.addr(), hist.workerEnv(),
		"FT_TTL_MS=" + strconv.Itoa(int(ttl.Milliseconds()))}, k.env...)...)
	var held heldReport
	w.expect("held", &held, 20*time.Second)

	locks := lock.NewClient(s.Client(t), lock.WithTTL(ttl))
	defer locks.Close()
	l := k.lock(locks)
	ctx, cancel := context.WithTimeout(context.Background(), 5*ttl)
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- hist.acquire(ctx, l, "here", k.mode) }()

	addToxic(t, p, "cut-up", "timeout", "upstream", `{"timeout":0}`)
	addToxic(t, p, "cut-down", "timeout", "downstream", `{"timeout":0}`)
	cut := time.Now()
	if err := <-got; err != nil {
		t.Fatalf("Acquire() while the holder is cut off: %v", err)
	}
	newHeld := time.Since(cut)
	rc := hist.enterAndWrite(t, ref, l, "here")
	wrote, lost := w.lateWrite()
	removeToxic(t, p, "cut-up")
	removeToxic(t, p, "cut-down")
	if err := w.wait(20 * time.Second); err != nil {
		t.Errorf("worker: %v", err)
	}
	hist.leave(t, rc, l, "here")
	// No widening: the cut-off hold ends at its Lost(), which must come
	// before the new holder's acquire.
	nops, took := checkLinearizable(t, hist.all(t), k.n())
	st := ref.stats()
	figure(t, scenario, "ttl_ms", ttl.Milliseconds(), "keys", len(k.keys),
		"new_holder_after_cut_ms", newHeld.Milliseconds(), "old_fence", held.Fence, "new_fence", members(l)[0].fence,
		"lost_fired", lost.Fired, "lost_reason", quoteSpace(lost.Reason), "lost_before_late_write", wrote.LostBefore,
		"late_write_accepted", wrote.Accepted, "stale_accepted", st.StaleAccepted,
		"history_ops", nops, "porcupine_ms", took.Milliseconds())
	if !lost.Fired || !wrote.LostBefore {
		t.Errorf("cut-off holder: Lost() fired %v, before its late write %v; want both (the new holder already wrote)", lost.Fired, wrote.LostBefore)
	}
	if wrote.Accepted || st.StaleAccepted != 0 {
		t.Errorf("late writes with fences %v: accepted %v (stale accepted %d), want every one rejected", held.Fences, wrote.Accepted, st.StaleAccepted)
	}
}
