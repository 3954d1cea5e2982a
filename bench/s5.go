package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"runtime/metrics"
	"runtime/trace"
	"time"

	"github.com/redis/go-redis/v9"
)

// s5: redlock over 3 and 5 nodes, one goroutine, TryAcquire+Release.
func (e *env) s5() error {
	for _, nodes := range []int{3, 5} {
		if err := e.s5Nodes(nodes); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) s5Nodes(nodes int) error {
	impls := []impl{parFloorImpl(nodes), redsyncImpl("redsync", nodes)}
	impls = append(impls, redlockImpls(nodes)...)
	ins, names, closeAll := e.openAll(impls, nodes, settings{})
	defer closeAll()
	for _, n := range names {
		if err := warm(e.ctx, ins[n], "s5:"+n, 50); err != nil {
			return err
		}
	}
	rounds, d := e.timed(250*time.Millisecond, time.Second)
	id := fmt.Sprintf("S5-%d", nodes)
	t := newTable(id, fmt.Sprintf("redlock over %d nodes, 1 goroutine, TryAcquire+Release, %v per round", nodes, d), "floor-par",
		column{Key: "p50", Header: "p50 µs", Prec: 1, Ratio: true},
		column{Key: "p99", Header: "p99 µs", Prec: 1, Ratio: true},
		column{Key: "ops", Header: "ops/s", Prec: 0, Ratio: true},
		column{Key: "rt", Header: "RT/op/node", Prec: 2},
		column{Key: "acq50", Header: "acq p50", Prec: 1},
		column{Key: "acq99", Header: "acq p99", Prec: 1},
		column{Key: "rel50", Header: "rel p50", Prec: 1},
		column{Key: "rel99", Header: "rel p99", Prec: 1},
		column{Key: "gc", Header: "GC/1k ops", Prec: 2},
		column{Key: "p99nogc", Header: "p99 w/o GC", Prec: 1, Ratio: true},
		column{Key: "allocs", Header: "allocs/op", Prec: 1},
		column{Key: "bytes", Header: "B/op", Prec: 0},
	)
	err := e.interleave(t, rounds, names, func(_ int, n string) (map[string]float64, error) {
		in := ins[n]
		key := "s5:" + n
		lat := make([]time.Duration, 0, 1<<15)
		acq := make([]time.Duration, 0, 1<<15)
		rel := make([]time.Duration, 0, 1<<15)
		clean := make([]time.Duration, 0, 1<<15) // ops during which no GC cycle ended
		rt0, _ := in.counts()
		gc0, allocs0, bytes0 := gcCycles(), heapAllocs(), heapBytes()
		start := time.Now()
		for end := start.Add(d); time.Now().Before(end); {
			g0 := gcCycles()
			ctx, task := e.ctx, (*trace.Task)(nil)
			if trace.IsEnabled() {
				// One task per op, so that go tool trace can show what a slow
				// one waited for (only when tracing: a task allocates).
				ctx, task = trace.NewTask(e.ctx, "s5:"+n)
				trace.Log(ctx, "impl", n)
			}
			t0 := time.Now()
			m := in.newMutex(key)
			r := trace.StartRegion(ctx, "acquire") // a no-op unless tracing
			ok, err := m.tryAcquire(ctx)
			r.End()
			if err != nil || !ok {
				return nil, fmt.Errorf("acquire: ok=%v err=%w", ok, err)
			}
			t1 := time.Now()
			r = trace.StartRegion(ctx, "release")
			err = m.release(ctx)
			r.End()
			if err != nil {
				return nil, fmt.Errorf("release: %w", err)
			}
			t2 := time.Now()
			if task != nil {
				task.End()
			}
			lat = append(lat, t2.Sub(t0))
			acq = append(acq, t1.Sub(t0))
			rel = append(rel, t2.Sub(t1))
			if gcCycles() == g0 {
				clean = append(clean, t2.Sub(t0))
			}
		}
		el := time.Since(start)
		rt1, _ := in.counts()
		ops := float64(len(lat))
		return map[string]float64{
			"p50": us(percentile(lat, 50)), "p99": us(percentile(lat, 99)), "ops": ops / el.Seconds(),
			"rt":    float64(rt1-rt0) / ops / float64(nodes),
			"acq50": us(percentile(acq, 50)), "acq99": us(percentile(acq, 99)),
			"rel50": us(percentile(rel, 50)), "rel99": us(percentile(rel, 99)),
			"gc":      float64(gcCycles()-gc0) / ops * 1000,
			"p99nogc": us(percentile(clean, 99)),
			"allocs":  float64(heapAllocs()-allocs0) / ops,
			"bytes":   float64(heapBytes()-bytes0) / ops,
		}, nil
	})
	if err != nil {
		return err
	}
	t.Notes = append(t.Notes, "floor-par: SET NX PX on every node at once, then EVALSHA compare-and-delete on every node at once, each waiting for all replies",
		"acq/rel: TryAcquire and Release timed apart (µs); GC/1k ops: GC cycles that ended during the round per 1000 ops; p99 w/o GC: p99 of the ops during which no GC cycle ended; allocs/op, B/op: heap objects and bytes allocated per op by the whole process")
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	if _, ok := t.Rows["redlock"]; ok {
		e.check(id, "redlock p50 / parallel floor p50", t.rat("redlock", "p50"), "<=", 1.1, "")
		e.check(id, "redlock p50 / go-redsync p50", ratioOfRatios(t, "redlock", "redsync", "p50"), "<=", 1, "")
		e.check(id, "redlock p99 / go-redsync p99", ratioOfRatios(t, "redlock", "redsync", "p99"), "<=", 1,
			fmt.Sprintf("p99 %.0fµs vs %.0fµs; %.2f vs %.2f GC cycles per 1000 ops, %.0f vs %.0f B/op",
				t.med("redlock", "p99"), t.med("redsync", "p99"), t.med("redlock", "gc"), t.med("redsync", "gc"),
				t.med("redlock", "bytes"), t.med("redsync", "bytes")))
	}
	return nil
}

// gcCycles returns the GC cycles completed so far (runtime/metrics: cheap,
// no stop-the-world, unlike ReadMemStats).
func gcCycles() uint64 { return readUint64Metric("/gc/cycles/total:gc-cycles") }

// heapAllocs returns the heap objects allocated so far.
func heapAllocs() uint64 { return readUint64Metric("/gc/heap/allocs:objects") }

// heapBytes returns the heap bytes allocated so far.
func heapBytes() uint64 { return readUint64Metric("/gc/heap/allocs:bytes") }

func readUint64Metric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// parFloorMutex is the floor over N nodes: both steps go to every node in
// parallel; held when a majority set the key.
type parFloorMutex struct {
	rdbs  []*redis.Client
	key   string
	token string
	ttl   time.Duration
}

func parFloorImpl(nodes int) impl {
	return impl{name: "floor-par", open: func(rdbs []*redis.Client, s settings) (func(string) mutex, func()) {
		ttl := s.ttlOr(peerTTL)
		return func(key string) mutex { return &parFloorMutex{rdbs: rdbs[:nodes], key: key, ttl: ttl} }, func() {}
	}}
}

// each runs fn on every node at once and returns how many returned true,
// and the first error.
func (m *parFloorMutex) each(fn func(rdb *redis.Client) (bool, error)) (int, error) {
	type res struct {
		ok  bool
		err error
	}
	ch := make(chan res, len(m.rdbs))
	for _, rdb := range m.rdbs {
		go func() {
			ok, err := fn(rdb)
			ch <- res{ok, err}
		}()
	}
	n := 0
	var first error
	for range m.rdbs {
		r := <-ch
		if r.ok {
			n++
		}
		if r.err != nil && first == nil {
			first = r.err
		}
	}
	return n, first
}

func (m *parFloorMutex) tryAcquire(ctx context.Context) (bool, error) {
	if m.token == "" {
		m.token = rand.Text()
	}
	n, err := m.each(func(rdb *redis.Client) (bool, error) {
		return rdb.SetNX(ctx, m.key, m.token, m.ttl).Result()
	})
	if n > len(m.rdbs)/2 {
		return true, nil
	}
	_ = m.release(ctx)
	return false, err
}

// acquire polls every millisecond.
func (m *parFloorMutex) acquire(ctx context.Context) error {
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	for {
		ok, err := m.tryAcquire(ctx)
		if ok || err != nil {
			return err
		}
		t.Reset(time.Millisecond)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (m *parFloorMutex) release(ctx context.Context) error {
	n, err := m.each(func(rdb *redis.Client) (bool, error) {
		r, err := floorDel.Run(ctx, rdb, []string{m.key}, m.token).Int64()
		return r == 1, err
	})
	if err == nil && n == 0 {
		err = errNotHeld
	}
	return err
}
