package faulttest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// pollGone polls until Redis no longer holds key's lock under token (it
// expired, or a waiter already holds it anew) and returns when that was
// seen.
func pollGone(ctx context.Context, t *testing.T, s *redistest.Server, key, token string) time.Time {
	t.Helper()
	rdb := s.Client(t)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		v, err := rdb.Get(ctx, lockKey(key)).Result()
		if err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") {
			// An election's hash: its term names the hold (see candidate).
			v, err = rdb.HGet(ctx, lockKey(key), "term").Result()
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("GET: %v", err)
		}
		if v != token {
			return time.Now()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("lock %q still held: %v", key, ctx.Err())
		case <-tick.C:
		}
	}
}

// TestProcess_holderKilled SIGKILLs a worker process while it holds a lock
// (renewed by its watchdog) and measures when the key is free and when a
// waiter, already waiting in this process, holds it.
func TestProcess_holderKilled(t *testing.T) { holderKilled(t, "holder_killed", mutexKind("killed")) }

// holderKilled is TestProcess_holderKilled on a hold of kind k (every
// member of a multi-lock must come free); scenario names its figure line.
func holderKilled(t *testing.T, scenario string, k holdKind) {
	const ttl = 2 * time.Second
	s := redistest.Start(t, redistest.Config{})
	ref := startReferee(t)
	hist := newHistory(t)
	w := startWorker(t, "hold", append([]string{"FT_REDIS=" + s.Addr(), "FT_REFEREE=" + ref.addr(), hist.workerEnv(),
		"FT_TTL_MS=" + strconv.Itoa(int(ttl.Milliseconds()))}, k.env...)...)
	var held heldReport
	w.expect("held", &held, 20*time.Second)
	// Let the holder renew at least once, so the kill lands mid-hold.
	time.Sleep(ttl / 2)

	locks := lock.NewClient(s.Client(t), lock.WithTTL(ttl))
	defer locks.Close()
	waiter := k.lock(locks)
	type result struct {
		at  time.Time
		err error
	}
	got := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*ttl)
	defer cancel()
	go func() {
		err := hist.acquire(ctx, waiter, "waiter", k.mode)
		got <- result{time.Now(), err}
	}()
	time.Sleep(50 * time.Millisecond) // the waiter is waiting

	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL worker: %v", err)
	}
	killed := time.Now()
	var freeAt time.Time // the last member to come free
	for _, key := range k.keys {
		freeAt = pollGone(ctx, t, s, key, held.Token)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter Acquire() error = %v, want nil", r.err)
	}
	rc, err := dialReferee(ref.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.close()
	if n, err := hist.writeAll(rc, waiter, "waiter"); err != nil || n != len(k.keys) {
		t.Errorf("waiter's writes (fences %v): %d of %d accepted, %v; want all accepted", members(waiter), n, len(k.keys), err)
	}
	if err := hist.release(context.Background(), waiter, "waiter"); err != nil {
		t.Errorf("waiter Release() error = %v", err)
	}
	_ = w.wait(5 * time.Second)
	// The killed hold ended somewhere after the kill (at its TTL, on the
	// server); it has no end of its own in the history.
	nops, took := checkLinearizable(t, widenEnds(hist.all(t), k.keys, workerClient(w.pid()), killed.UnixNano(), now()), k.n())

	free, acquired := freeAt.Sub(killed), r.at.Sub(killed)
	newFence := members(waiter)[0].fence
	figure(t, scenario, "ttl_ms", ttl.Milliseconds(), "keys", len(k.keys), "free_after_ms", free.Milliseconds(),
		"waiter_held_after_ms", acquired.Milliseconds(), "backoff_max_ms", lock.DefaultBackoffMax.Milliseconds(),
		"old_fence", held.Fence, "new_fence", newFence, "history_ops", nops, "porcupine_ms", took.Milliseconds())
	// The key's TTL was last set before the kill, so it is gone within the
	// TTL; polling and a loaded machine add a little.
	if slack := 250 * time.Millisecond; free > ttl+slack {
		t.Errorf("key free %v after the kill, want within TTL %v (+%v polling slack)", free, ttl, slack)
	}
	if slack := 500 * time.Millisecond; acquired > ttl+lock.DefaultBackoffMax+slack {
		t.Errorf("waiter held the lock %v after the kill, want within TTL+backoff max %v (+%v)", acquired, ttl+lock.DefaultBackoffMax, slack)
	}
	for _, m := range members(waiter) {
		if m.fence <= held.Fences[m.key] {
			t.Errorf("%s: new fence %d, want above the killed holder's %d", m.key, m.fence, held.Fences[m.key])
		}
	}
}

// TestProcess_holderPaused SIGSTOPs a worker process holding a lock for
// twice the TTL. Meanwhile a holder in this process takes the lock and
// writes to the fenced store; then the worker is continued and makes its
// late write with the old fence. The store must reject it, and the worker's
// Lost() must fire on resume. The referee also counts the overlap: the
// paused holder was still inside its critical section, which is exactly the
// gap that only fencing closes.
func TestProcess_holderPaused(t *testing.T) { holderPaused(t, "holder_paused", mutexKind("paused")) }

// holderPaused is TestProcess_holderPaused on a hold of kind k: on a
// semaphore, k.semN permits are held (the worker's and this process's);
// on a multi-lock, the late write goes to every member. scenario names its
// figure line.
func holderPaused(t *testing.T, scenario string, k holdKind) {
	const ttl = time.Second
	s := redistest.Start(t, redistest.Config{})
	ref := startReferee(t)
	hist := newHistory(t)
	w := startWorker(t, "hold", append([]string{"FT_REDIS=" + s.Addr(), "FT_REFEREE=" + ref.addr(), hist.workerEnv(),
		"FT_TTL_MS=" + strconv.Itoa(int(ttl.Milliseconds()))}, k.env...)...)
	var held heldReport
	w.expect("held", &held, 20*time.Second)

	if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP worker: %v", err)
	}
	stopped := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = w.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()

	locks := lock.NewClient(s.Client(t), lock.WithTTL(ttl))
	defer locks.Close()
	l := k.lock(locks)
	ctx, cancel := context.WithTimeout(context.Background(), 5*ttl)
	defer cancel()
	if err := hist.acquire(ctx, l, "here", k.mode); err != nil {
		t.Fatalf("Acquire() while the holder is paused: %v", err)
	}
	newHeld := time.Since(stopped)
	rc := hist.enterAndWrite(t, ref, l, "here")

	time.Sleep(time.Until(stopped.Add(2 * ttl)))
	if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT worker: %v", err)
	}
	resumed = true
	paused := time.Since(stopped)
	wrote, lost := w.lateWrite()
	if err := w.wait(10 * time.Second); err != nil {
		t.Errorf("worker: %v", err)
	}
	hist.leave(t, rc, l, "here")
	// The paused hold ended somewhere between the SIGSTOP and its Lost().
	raw := hist.all(t)
	ops := widenEnds(slices.Clone(raw), k.keys, workerClient(w.pid()), stopped.UnixNano(), now())
	nops, took := checkLinearizable(t, ops, k.n())
	// Control on the same real history: taken at its word (its hold lasting
	// until its Lost() closed, after the resume), the paused holder overlaps
	// the new one, and porcupine must say so.
	if res := linearizable(raw, k.n()); res != porcupine.Illegal {
		t.Errorf("porcupine on the paused holder's own view = %s, want %s (it overlaps the new holder)", res, porcupine.Illegal)
	}
	st := ref.stats()
	newFence := members(l)[0].fence
	figure(t, scenario, "ttl_ms", ttl.Milliseconds(), "keys", len(k.keys), "paused_ms", paused.Milliseconds(),
		"new_holder_after_ms", newHeld.Milliseconds(), "old_fence", held.Fence, "new_fence", newFence,
		"late_write_accepted", wrote.Accepted, "lost_fired", lost.Fired, "lost_reason", quoteSpace(lost.Reason),
		"lost_after_resume_ms", lost.AfterMS, "lost_before_late_write", wrote.LostBefore,
		"overlaps", st.Overlaps, "stale_presented", st.StalePresented, "stale_accepted", st.StaleAccepted,
		"history_ops", nops, "porcupine_ms", took.Milliseconds())

	for _, m := range members(l) {
		if m.fence <= held.Fences[m.key] {
			t.Errorf("%s: new fence %d, want above the paused holder's %d", m.key, m.fence, held.Fences[m.key])
		}
	}
	if wrote.Accepted || st.StaleAccepted != 0 {
		t.Errorf("late writes with fences %v: accepted %v (stale accepted %d), want every one rejected", held.Fences, wrote.Accepted, st.StaleAccepted)
	}
	if !lost.Fired {
		t.Errorf("paused holder's Lost() did not fire within 5s of resuming")
	}
	// unanswered: a renewal (or a new hold's check) was out when the
	// process stopped, and its deadline passed before any answer was read.
	switch lost.Reason {
	case lock.LossExpired.String(), lock.LossStolen.String(), lock.LossUnanswered.String():
	default:
		t.Errorf("paused holder's loss reason %q, want %q, %q or %q", lost.Reason, lock.LossExpired, lock.LossStolen, lock.LossUnanswered)
	}
	if lost.AfterMS > 1000 {
		t.Errorf("Lost() fired %dms after the resumed holder was told to write, want at once", lost.AfterMS)
	}
	if st.Overlaps != len(k.keys) {
		t.Errorf("referee overlaps = %d, want %d (the paused holder never left its section of any key)", st.Overlaps, len(k.keys))
	}
}

// quoteSpace makes a value with spaces greppable as one field.
func quoteSpace(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if r == ' ' {
			return strconv.Quote(s)
		}
	}
	return s
}
