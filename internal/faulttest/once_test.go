package faulttest

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// onceWorker runs Client.Once on FT_KEY with TTL FT_TTL_MS and an fn that
// reports "running" and then never returns: a step that hangs until the
// process is killed.
func onceWorker() error {
	ttl := time.Duration(envInt("FT_TTL_MS", 1000)) * time.Millisecond
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("FT_REDIS")})
	defer rdb.Close()
	c := lock.NewClient(rdb, lock.WithTTL(ttl))
	defer c.Close()
	_, _, err := c.Once(context.Background(), os.Getenv("FT_KEY"), func(ctx context.Context) ([]byte, error) {
		report("running", map[string]int64{"fence": lock.OnceFence(ctx)})
		select {} // hangs until the process is killed
	})
	return err
}

// TestProcess_onceHolderKilled: a process running Once's fn is SIGKILLed
// mid-fn. Nothing was stored, so a caller in this process that waits on
// the same key runs fn itself once the dead holder's TTL has passed, and
// stores its own result.
func TestProcess_onceHolderKilled(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	s := redistest.Start(t, redistest.Config{})
	key := "once-killed"
	w := startWorker(t, "once", "FT_REDIS="+s.Addr(), "FT_KEY="+key,
		"FT_TTL_MS="+strconv.Itoa(int(ttl.Milliseconds())))
	var running struct{ Fence int64 }
	w.expect("running", &running, 20*time.Second)

	locks := lock.NewClient(s.Client(t), lock.WithTTL(ttl))
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*ttl+lock.DefaultBackoffMax)
	defer cancel()
	type result struct {
		val    []byte
		shared bool
		err    error
		at     time.Time
	}
	got := make(chan result, 1)
	runs := 0
	go func() {
		v, shared, err := locks.Once(ctx, key, func(context.Context) ([]byte, error) {
			runs++
			return []byte("after the crash"), nil
		})
		got <- result{v, shared, err, time.Now()}
	}()
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL worker: %v", err)
	}
	killed := time.Now()
	_ = w.wait(5 * time.Second)
	r := <-got
	if r.err != nil {
		t.Fatalf("Once() after the holder was killed: error = %v", r.err)
	}
	if string(r.val) != "after the crash" || r.shared || runs != 1 {
		t.Fatalf("Once() = %q, shared %v, fn ran %d times; want our own result, not shared, fn once", r.val, r.shared, runs)
	}
	after := r.at.Sub(killed)
	figure(t, "once_holder_killed", "ttl_ms", ttl.Milliseconds(), "fn_ran_after_ms", after.Milliseconds())
	if slack := 500 * time.Millisecond; after > ttl+lock.DefaultBackoffMax+slack {
		t.Errorf("fn ran %v after the kill, want within TTL+backoff max %v (+%v)", after, ttl+lock.DefaultBackoffMax, slack)
	}
	if v, err := s.Client(t).Get(ctx, "lock:{"+key+"}:result").Result(); err != nil || v == "" {
		t.Errorf("stored result after the crash: %q, %v; want our result stored", v, err)
	}
}
