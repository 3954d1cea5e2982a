package faulttest

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestProcess_rwHolderPaused SIGSTOPs a worker process holding a read
// (then a write) hold of a read-write lock for twice the TTL. A writer in
// this process gets the lock once the paused hold expired, and writes to
// the fenced store; the resumed worker's late write carries the old fence
// and must be rejected, and its Lost() must fire.
func TestProcess_rwHolderPaused(t *testing.T) {
	for _, side := range []string{"read", "write"} {
		t.Run(side, func(t *testing.T) {
			const ttl = time.Second
			s := redistest.Start(t, redistest.Config{})
			ref := startReferee(t)
			hist := newHistory(t)
			key := "rw-paused-" + side
			w := startWorker(t, "hold", "FT_REDIS="+s.Addr(), "FT_REFEREE="+ref.addr(), hist.workerEnv(),
				"FT_KEY="+key, "FT_TTL_MS="+strconv.Itoa(int(ttl.Milliseconds())), "FT_RW="+side)
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
			l := locks.NewRWLock(key).WriteLock()
			ctx, cancel := context.WithTimeout(context.Background(), 5*ttl)
			defer cancel()
			if err := hist.acquire(ctx, l, "here", holdExclusive); err != nil {
				t.Fatalf("writer Acquire() while the holder is paused: %v", err)
			}
			newHeld := time.Since(stopped)
			rc := hist.enterAndWrite(t, ref, l, "here")

			time.Sleep(time.Until(stopped.Add(2 * ttl))) // the pause under test
			if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatalf("SIGCONT worker: %v", err)
			}
			resumed = true
			wrote, lost := w.lateWrite()
			if err := w.wait(10 * time.Second); err != nil {
				t.Errorf("worker: %v", err)
			}
			hist.leave(t, rc, l, "here")
			// The paused hold ended somewhere between the SIGSTOP and its Lost().
			ops := widenEnd(hist.all(t), key, workerClient(w.pid()), stopped.UnixNano(), now())
			nops, took := checkLinearizable(t, ops, 1)
			st := ref.stats()
			figure(t, "rw_holder_paused_"+side, "ttl_ms", ttl.Milliseconds(),
				"writer_after_ms", newHeld.Milliseconds(), "old_fence", held.Fence, "new_fence", l.Fence(),
				"late_write_accepted", wrote.Accepted, "lost_fired", lost.Fired, "lost_reason", quoteSpace(lost.Reason),
				"stale_accepted", st.StaleAccepted, "history_ops", nops, "porcupine_ms", took.Milliseconds())
			if l.Fence() <= held.Fence {
				t.Errorf("writer fence %d, want above the paused %s hold's %d", l.Fence(), side, held.Fence)
			}
			if wrote.Accepted || st.StaleAccepted != 0 {
				t.Errorf("late write with fence %d accepted, want rejected", held.Fence)
			}
			if !lost.Fired {
				t.Errorf("paused holder's Lost() did not fire within 5s of resuming")
			}
		})
	}
}
