package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

const (
	semGoroutines = 64
	semPermits    = 8
)

// agentlockSem is agentlock's semaphore of n permits: each mutex the
// harness asks for is a new permit of the key's one Semaphore, made once
// per key as a user keeps one per tenant.
func agentlockSem(name string, n int, opts ...lock.Option) impl {
	return impl{name: name, open: func(rdbs []*redis.Client, _ settings) (func(string) mutex, func()) {
		c := lock.NewClient(rdbs[0], opts...)
		var sems sync.Map
		return func(key string) mutex {
			s, ok := sems.Load(key)
			if !ok {
				s, _ = sems.LoadOrStore(key, c.NewSemaphore(key, n))
			}
			return alMutex{l: s.(*lock.Semaphore).Permit()}
		}, func() { _ = c.Close() }
	}}
}

// sem: 64 goroutines take turns at 8 places. The semaphore of 8 permits on
// one key, against agentlock's mutex on one key (1 place) and on 8 keys
// (goroutine g on key g mod 8: 8 places, each a queue of its own).
// go-redsync has no semaphore. Each hold is empty: the figure is the cost
// of a permit, acquire and release, with 8 held at once.
func (e *env) sem() error {
	impls := []impl{
		agentlockImpl("mutex"),
		agentlockImpl("mutex-8keys"),
		agentlockSem("sem-8", semPermits),
		agentlockSem("sem-8-nofence", semPermits, lock.WithFencing(false)),
	}
	ins, names, closeAll := e.openAll(impls, 1, settings{})
	defer closeAll()
	for _, n := range names {
		if err := warm(e.ctx, ins[n], "sem:warm:"+n, 20); err != nil {
			return err
		}
	}
	rounds, d := e.timed(300*time.Millisecond, time.Second)
	t := newTable("SEM", fmt.Sprintf("%d goroutines, %d places (permits, or keys for mutex-8keys; 1 for mutex), %v per round",
		semGoroutines, semPermits, d), "mutex",
		column{Key: "ops", Header: "holds/s", Prec: 0, Ratio: true},
		column{Key: "p50", Header: "p50 µs", Prec: 1, Ratio: true},
		column{Key: "p99", Header: "p99 µs", Prec: 1, Ratio: true},
		column{Key: "rt_op", Header: "RT/op", Prec: 2},
		column{Key: "errs", Header: "errors", Prec: 0},
	)
	err := e.interleave(t, rounds, names, func(r int, n string) (map[string]float64, error) {
		in := ins[n]
		return loadRound(in, semGoroutines, d, func(g int) error {
			key := "sem:" + n + ":" + strconv.Itoa(r)
			if n == "mutex-8keys" {
				key += ":" + strconv.Itoa(g%semPermits)
			}
			m := in.newMutex(key)
			if err := m.acquire(e.ctx); err != nil {
				return err
			}
			return m.release(e.ctx)
		}), nil
	})
	if err != nil {
		return err
	}
	t.Notes = append(t.Notes, "one lock Client per row over its own go-redis client; a hold is acquire (waiting) then release, nothing inside",
		"go-redsync has no semaphore; the mutex rows are the nearest equivalent")
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	e.check("SEM", "semaphore holds/s / 8-key mutex holds/s", t.med("sem-8", "ops")/t.med("mutex-8keys", "ops"), ">=", 0.5,
		fmt.Sprintf("%.0f vs %.0f holds/s", t.med("sem-8", "ops"), t.med("mutex-8keys", "ops")))
	return nil
}

// loadRound runs op on goroutines goroutines, each again and again until d
// has passed, timing every call that succeeds, and returns ops/s, p50 and
// p99 in µs, round trips per op over in's clients, and the failed calls.
func loadRound(in *instance, goroutines int, d time.Duration, op func(g int) error) map[string]float64 {
	lats := make([][]time.Duration, goroutines)
	errs := make([]int, goroutines)
	var wg sync.WaitGroup
	rt0, _ := in.counts()
	start := time.Now()
	end := start.Add(d)
	for g := range goroutines {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			for time.Now().Before(end) {
				t0 := time.Now()
				if err := op(g); err != nil {
					errs[g]++
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			lats[g] = lat
		})
	}
	wg.Wait()
	el := time.Since(start)
	rt1, _ := in.counts()
	var all []time.Duration
	nerr := 0
	for g := range goroutines {
		nerr += errs[g]
		all = append(all, lats[g]...)
	}
	ops := float64(len(all))
	return map[string]float64{
		"ops": ops / el.Seconds(), "p50": us(percentile(all, 50)), "p99": us(percentile(all, 99)),
		"rt_op": float64(rt1-rt0) / ops, "errs": float64(nerr),
	}
}
