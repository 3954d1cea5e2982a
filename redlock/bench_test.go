package redlock_test

import (
	"context"
	"runtime/metrics"
	"testing"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
	"github.com/agentlock/lock/redlock"
)

// BenchmarkAcquireRelease is one uncontended Acquire+Release over five real
// servers; compare with BenchmarkCoreAcquireRelease (one server).
func BenchmarkAcquireRelease(b *testing.B) {
	rdbs := make([]redis.UniversalClient, 5)
	for i := range rdbs {
		s := redistest.Start(b, redistest.Config{})
		rdb := s.Client(b)
		rdbs[i] = rdb
	}
	c := redlock.New(rdbs)
	defer c.Close()
	l := c.NewLock("bench")
	ctx := context.Background()
	b.ReportAllocs()
	g0 := goroutinesCreated()
	for b.Loop() {
		if err := l.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(goroutinesCreated()-g0)/float64(b.N), "goroutines/op")
}

// goroutinesCreated returns the goroutines the process has started so far.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// BenchmarkCoreAcquireRelease is the same with the core lock on one server.
func BenchmarkCoreAcquireRelease(b *testing.B) {
	s := redistest.Start(b, redistest.Config{})
	c := lock.NewClient(s.Client(b))
	defer c.Close()
	l := c.NewLock("bench")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
