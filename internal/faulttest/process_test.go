package faulttest

import (
	"context"
	"errors"
	"slices"
	"strconv"
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
func TestProcess_holderKilled(t *testing.T) {
	const ttl = 2 * time.Second
	s := redistest.Start(t, redistest.Config{})
	ref := startReferee(t)
	hist := newHistory(t)
	key := "killed"
	w := startWorker(t, "hold", "FT_REDIS="+s.Addr(), "FT_REFEREE="+ref.addr(), hist.workerEnv(),
		"FT_KEY="+key, "FT_TTL_MS="+strconv.Itoa(int(ttl.Milliseconds())))
	var held heldReport
	w.expect("held", &held, 20*time.Second)
	// Let the holder renew at least once, so the kill lands mid-hold.
	time.Sleep(ttl / 2)

	locks := lock.NewClient(s.Client(t), lock.WithTTL(ttl))
	defer locks.Close()
	waiter := locks.NewLock(key)
	type result struct {
		at  time.Time
		err error
	}
	got := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*ttl)
	defer cancel()
	go func() {
		err := hist.acquire(ctx, waiter, key, "waiter", holdExclusive)
		got <- result{time.Now(), err}
	}()
	time.Sleep(50 * time.Millisecond) // the waiter is waiting

	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL worker: %v", err)
	}
	killed := time.Now()
	freeAt := pollGone(ctx, t, s, key, held.Token)
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter Acquire() error = %v, want nil", r.err)
	}
	rc, err := dialReferee(ref.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.close()
	if ok, err := hist.write(rc, key, "waiter", waiter.Fence()); err != nil || !ok {
		t.Errorf("waiter's write (fence %d): accepted %v, %v; want accepted", waiter.Fence(), ok, err)
	}
	if err := hist.release(context.Background(), waiter, key, "waiter"); err != nil {
		t.Errorf("waiter Release() error = %v", err)
	}
	_ = w.wait(5 * time.Second)
	// The killed hold ended somewhere after the kill (at its TTL, on the
	// server); it has no end of its own in the history.
	nops, took := checkLinearizable(t, widenEnd(hist.all(t), key, workerClient(w.pid()), killed.UnixNano(), now()), 1)

	free, acquired := freeAt.Sub(killed), r.at.Sub(killed)
	figure(t, "holder_killed", "ttl_ms", ttl.Milliseconds(), "free_after_ms", free.Milliseconds(),
		"waiter_held_after_ms", acquired.Milliseconds(), "backoff_max_ms", lock.DefaultBackoffMax.Milliseconds(),
		"old_fence", held.Fence, "new_fence", waiter.Fence(), "history_ops", nops, "porcupine_ms", took.Milliseconds())
	// The key's TTL was last set before the kill, so it is gone within the
	// TTL; polling and a loaded machine add a little.
	if slack := 250 * time.Millisecond; free > ttl+slack {
		t.Errorf("key free %v after the kill, want within TTL %v (+%v polling slack)", free, ttl, slack)
	}
	if slack := 500 * time.Millisecond; acquired > ttl+lock.DefaultBackoffMax+slack {
		t.Errorf("waiter held the lock %v after the kill, want within TTL+backoff max %v (+%v)", acquired, ttl+lock.DefaultBackoffMax, slack)
	}
	if waiter.Fence() <= held.Fence {
		t.Errorf("new fence %d, want above the killed holder's %d", waiter.Fence(), held.Fence)
	}
}

// TestProcess_holderPaused SIGSTOPs a worker process holding a lock for
// twice the TTL. Meanwhile a holder in this process takes the lock and
// writes to the fenced store; then the worker is continued and makes its
// late write with the old fence. The store must reject it, and the worker's
// Lost() must fire on resume. The referee also counts the overlap: the
// paused holder was still inside its critical section, which is exactly the
// gap that only fencing closes.
func TestProcess_holderPaused(t *testing.T) { holderPaused(t, "holder_paused", 0) }

// holderPaused is TestProcess_holderPaused on a mutex (semN 0) or on a
// semaphore of semN permits, semN of them held (the worker's and this
// process's); scenario names its figure line.
func holderPaused(t *testing.T, scenario string, semN int) {
	const ttl = time.Second
	s := redistest.Start(t, redistest.Config{})
	ref := startReferee(t)
	hist := newHistory(t)
	key := "paused"
	w := startWorker(t, "hold", "FT_REDIS="+s.Addr(), "FT_REFEREE="+ref.addr(), hist.workerEnv(),
		"FT_KEY="+key, "FT_TTL_MS="+strconv.Itoa(int(ttl.Milliseconds())), "FT_SEM_N="+strconv.Itoa(semN))
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
	l, mode := locks.NewLock(key), byte(holdExclusive)
	if semN > 0 {
		l, mode = locks.NewSemaphore(key, semN).Permit(), holdPermit
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*ttl)
	defer cancel()
	if err := hist.acquire(ctx, l, key, "here", mode); err != nil {
		t.Fatalf("Acquire() while the holder is paused: %v", err)
	}
	newHeld := time.Since(stopped)
	rc, err := dialReferee(ref.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.close()
	if _, err := rc.enter(key, l.Fence()); err != nil {
		t.Fatal(err)
	}
	ok, err := hist.write(rc, key, "here", l.Fence())
	if err != nil || !ok {
		t.Fatalf("new holder's write (fence %d): accepted %v, %v; want accepted", l.Fence(), ok, err)
	}

	time.Sleep(time.Until(stopped.Add(2 * ttl)))
	if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT worker: %v", err)
	}
	resumed = true
	paused := time.Since(stopped)
	if err := w.send("WRITE"); err != nil {
		t.Fatalf("send WRITE: %v", err)
	}
	var wrote wroteReport
	w.expect("wrote", &wrote, 10*time.Second)
	var lost lostReport
	w.expect("lost", &lost, 10*time.Second)
	if err := w.wait(10 * time.Second); err != nil {
		t.Errorf("worker: %v", err)
	}
	_ = rc.exit(key)
	if err := hist.release(context.Background(), l, key, "here"); err != nil {
		t.Errorf("new holder Release() error = %v", err)
	}
	// The paused hold ended somewhere between the SIGSTOP and its Lost().
	raw := hist.all(t)
	ops := widenEnd(slices.Clone(raw), key, workerClient(w.pid()), stopped.UnixNano(), now())
	nops, took := checkLinearizable(t, ops, max(semN, 1))
	// Control on the same real history: taken at its word (its hold lasting
	// until its Lost() closed, after the resume), the paused holder overlaps
	// the new one, and porcupine must say so.
	if res := linearizable(raw, max(semN, 1)); res != porcupine.Illegal {
		t.Errorf("porcupine on the paused holder's own view = %s, want %s (it overlaps the new holder)", res, porcupine.Illegal)
	}
	st := ref.stats()
	figure(t, scenario, "ttl_ms", ttl.Milliseconds(), "paused_ms", paused.Milliseconds(),
		"new_holder_after_ms", newHeld.Milliseconds(), "old_fence", held.Fence, "new_fence", l.Fence(),
		"late_write_accepted", wrote.Accepted, "lost_fired", lost.Fired, "lost_reason", quoteSpace(lost.Reason),
		"lost_after_resume_ms", lost.AfterMS, "lost_before_late_write", wrote.LostBefore,
		"overlaps", st.Overlaps, "stale_presented", st.StalePresented, "stale_accepted", st.StaleAccepted,
		"history_ops", nops, "porcupine_ms", took.Milliseconds())

	if l.Fence() <= held.Fence {
		t.Errorf("new fence %d, want above the paused holder's %d", l.Fence(), held.Fence)
	}
	if wrote.Accepted || st.StaleAccepted != 0 {
		t.Errorf("late write with fence %d accepted (stale accepted %d), want rejected", held.Fence, st.StaleAccepted)
	}
	if !lost.Fired {
		t.Errorf("paused holder's Lost() did not fire within 5s of resuming")
	}
	if lost.Reason != lock.LossExpired.String() && lost.Reason != lock.LossStolen.String() {
		t.Errorf("paused holder's loss reason %q, want %q or %q", lost.Reason, lock.LossExpired, lock.LossStolen)
	}
	if lost.AfterMS > 1000 {
		t.Errorf("Lost() fired %dms after the resumed holder was told to write, want at once", lost.AfterMS)
	}
	if st.Overlaps != 1 {
		t.Errorf("referee overlaps = %d, want 1 (the paused holder never left its section)", st.Overlaps)
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
