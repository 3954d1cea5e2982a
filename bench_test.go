//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package lock_test

// Hot-path benchmarks for profiling, e.g.
//
//	go test -run '^$' -bench . -benchmem -cpuprofile cpu.out
//	go tool pprof -top lock.test cpu.out
//
// They run on a real redis-server (started on a free loopback port) when one
// is on PATH, else on an in-process miniredis; LOCK_BENCH_MINIREDIS=1 forces
// miniredis. Side-by-side comparisons with other libraries live in bench/.

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// benchRedis returns a client for the benchmark's Redis, closed with b.
func benchRedis(b *testing.B) *redis.Client {
	b.Helper()
	var addr string
	if os.Getenv("LOCK_BENCH_MINIREDIS") != "1" && redistest.Available() == nil {
		addr = redistest.Start(b, redistest.Config{}).Addr()
	} else {
		addr = miniredis.RunT(b).Addr()
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { rdb.Close() })
	return rdb
}

// benchLocks returns a lock Client over a fresh Redis, closed with b, after
// one acquire+release so that connections and scripts are ready.
func benchLocks(b *testing.B, opts ...lock.Option) (*lock.Client, *redis.Client) {
	b.Helper()
	rdb := benchRedis(b)
	c := lock.NewClient(rdb, opts...)
	b.Cleanup(func() { c.Close() })
	l := c.NewLock("warm")
	if ok, err := l.TryAcquire(context.Background()); err != nil || !ok {
		b.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
	}
	if err := l.Release(context.Background()); err != nil {
		b.Fatalf("Release() error = %v", err)
	}
	return c, rdb
}

// BenchmarkTryAcquireRelease is one uncontended critical section: NewLock,
// TryAcquire, Release.
func BenchmarkTryAcquireRelease(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []lock.Option
	}{
		{"default", nil},
		{"nofence", []lock.Option{lock.WithFencing(false)}},
		{"watch", []lock.Option{lock.WithReleaseMode(lock.ReleaseWatch)}},
		{"info", []lock.Option{lock.WithHolderInfo(true)}},
		{"audit", []lock.Option{lock.WithAudit("bench:audit", 1000)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, _ := benchLocks(b, bc.opts...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l := c.NewLock("k")
				if ok, err := l.TryAcquire(ctx); err != nil || !ok {
					b.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatalf("Release() error = %v", err)
				}
			}
		})
	}
}

// BenchmarkKindsTryAcquireRelease is one uncontended critical section of a
// reader, a writer and a semaphore permit: TryAcquire, Release, on a new
// handle each time; "info" with holder info on (WithHolderInfo).
func BenchmarkKindsTryAcquireRelease(b *testing.B) {
	for _, kind := range []string{"read", "write", "permit"} {
		for _, info := range []bool{false, true} {
			name := kind + "/default"
			var opts []lock.Option
			if info {
				name, opts = kind+"/info", []lock.Option{lock.WithHolderInfo(true)}
			}
			b.Run(name, func(b *testing.B) {
				c, rdb := benchLocks(b, opts...)
				rw, sem := c.NewRWLock("k"), c.NewSemaphore("s", 8)
				ctx := context.Background()
				b.ReportAllocs()
				rdb.ConfigResetStat(ctx)
				for b.Loop() {
					var l *lock.Lock
					switch kind {
					case "read":
						l = rw.ReadLock()
					case "write":
						l = rw.WriteLock()
					default:
						l = sem.Permit()
					}
					if ok, err := l.TryAcquire(ctx); err != nil || !ok {
						b.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
					}
					if err := l.Release(ctx); err != nil {
						b.Fatalf("Release() error = %v", err)
					}
				}
				b.ReportMetric(float64(scriptUsec(b, rdb))/float64(b.N), "srv-µs/op")
			})
		}
	}
}

// scriptUsec is the time the server spent in scripts (EVAL and EVALSHA)
// since its statistics were last reset, in µs, from INFO commandstats.
func scriptUsec(b *testing.B, rdb *redis.Client) int64 {
	b.Helper()
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatalf("INFO commandstats: %v", err)
	}
	var usec int64
	for _, line := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k != "cmdstat_evalsha" && k != "cmdstat_eval" {
			continue
		}
		for _, kv := range strings.Split(v, ",") {
			if n, ok := strings.CutPrefix(kv, "usec="); ok {
				u, _ := strconv.ParseInt(n, 10, 64)
				usec += u
			}
		}
	}
	return usec
}

// BenchmarkTryAcquireReleaseParallel runs critical sections on distinct
// keys from GOMAXPROCS×8 goroutines.
func BenchmarkTryAcquireReleaseParallel(b *testing.B) {
	c, _ := benchLocks(b)
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		key := "p" + strconv.FormatInt(next.Add(1), 10)
		for pb.Next() {
			l := c.NewLock(key)
			if ok, err := l.TryAcquire(ctx); err != nil || !ok {
				b.Errorf("TryAcquire() = %v, %v, want true, nil", ok, err)
				return
			}
			if err := l.Release(ctx); err != nil {
				b.Errorf("Release() error = %v", err)
				return
			}
		}
	})
}

// BenchmarkTryAcquire times the acquisition alone; each hold is released
// with the timer stopped.
func BenchmarkTryAcquire(b *testing.B) {
	c, _ := benchLocks(b)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		l := c.NewLock("k")
		if ok, err := l.TryAcquire(ctx); err != nil || !ok {
			b.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
		}
		b.StopTimer()
		if err := l.Release(ctx); err != nil {
			b.Fatalf("Release() error = %v", err)
		}
		b.StartTimer()
	}
}

// BenchmarkRelease times the release alone; each hold is acquired with the
// timer stopped.
func BenchmarkRelease(b *testing.B) {
	c, _ := benchLocks(b)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		l := c.NewLock("k")
		if ok, err := l.TryAcquire(ctx); err != nil || !ok {
			b.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
		}
		b.StartTimer()
		if err := l.Release(ctx); err != nil {
			b.Fatalf("Release() error = %v", err)
		}
	}
}

// benchPipes counts the pipelines a client sends: the renewal batches.
type benchPipes struct {
	pipes atomic.Int64
	cmds  atomic.Int64
	sent  chan struct{} // one token per pipeline, dropped when full
}

func (h *benchPipes) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *benchPipes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *benchPipes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipes.Add(1)
		h.cmds.Add(int64(len(cmds)))
		select {
		case h.sent <- struct{}{}:
		default:
		}
		return next(ctx, cmds)
	}
}

// BenchmarkRenewalBatch holds 500 locks with a 150ms TTL, so the renewal
// loop renews them every 50ms in one pipeline; an op is one renewal batch.
// ns/op is mostly the wait between ticks: read cpu-ns/batch (user+system CPU
// of the whole test process per batch, from getrusage; on miniredis that
// includes the server) and profile with
// -cpuprofile. The harness waits on the renewal pipelines themselves, so it
// adds next to nothing to the CPU figure.
func BenchmarkRenewalBatch(b *testing.B) {
	const held = 500
	ttl := 150 * time.Millisecond
	c, rdb := benchLocks(b, lock.WithTTL(ttl), lock.WithFencing(false))
	h := &benchPipes{sent: make(chan struct{}, 1)}
	rdb.AddHook(h)
	ctx := context.Background()
	locks := make([]*lock.Lock, held)
	for i := range locks {
		locks[i] = c.NewLock("r" + strconv.Itoa(i))
		if ok, err := locks[i].TryAcquire(ctx); err != nil || !ok {
			b.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
		}
	}
	b.Cleanup(func() {
		for _, l := range locks {
			_ = l.Release(context.Background())
		}
	})
	wait := func(n int64) {
		for h.pipes.Load() < n {
			<-h.sent
		}
	}
	wait(h.pipes.Load() + 1) // start at a tick
	p0, c0, cpu0 := h.pipes.Load(), h.cmds.Load(), processCPU()
	b.ResetTimer()
	wait(p0 + int64(b.N))
	b.StopTimer()
	batches := float64(h.pipes.Load() - p0)
	b.ReportMetric(float64(processCPU()-cpu0)/batches, "cpu-ns/batch")
	b.ReportMetric(float64(h.cmds.Load()-c0)/batches, "renewals/batch")
	for _, l := range locks {
		select {
		case <-l.Lost():
			b.Fatalf("lock %q lost: %v", l.Key(), l.LostErr())
		default:
		}
	}
}

// processCPU is the user+system CPU time of the process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
