package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// rw: readers per second with 64 readers (16 on each of 4 Clients, as 4
// processes) and one writer taking the lock every 100ms, on the read-write
// lock and, for comparison, on the mutex (every reader then excludes every
// other). A reader's critical section is one GET of the "index" and then
// work (a search: 2ms asleep; table RW0: none, the lock's own cost); the
// writer's a SET and 2ms. Reported per round: read sections completed per
// second, writes done, and the writer's median wait.
func (e *env) rw() error {
	for _, work := range []time.Duration{2 * time.Millisecond, 0} {
		if err := e.rwWith(work); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) rwWith(work time.Duration) error {
	const clients, readersPer = 4, 16
	rounds, per := e.timed(2*time.Second, 6*time.Second)
	names := []string{"mutex", "rwlock"}
	id := "RW"
	if work == 0 {
		id = "RW0"
	}
	t := newTable(id, fmt.Sprintf("64 readers over 4 Clients, %v of work each, one writer every 100ms (%v per round)", work, per), "mutex",
		column{Key: "reads", Header: "reads/s", Prec: 0, Ratio: true},
		column{Key: "writes", Header: "writes", Prec: 0},
		column{Key: "wwait", Header: "writer wait p50 ms", Prec: 1},
	)
	var rdbs []*redis.Client
	var locks []*lock.Client
	for range clients {
		rdb, _ := newClient(e.servers[0].Addr())
		rdbs = append(rdbs, rdb)
		locks = append(locks, lock.NewClient(rdb))
	}
	defer func() {
		for i := range locks {
			locks[i].Close()
			rdbs[i].Close()
		}
	}()
	err := e.interleave(t, rounds, names, func(r int, n string) (map[string]float64, error) {
		key := fmt.Sprintf("%s:%s:%d", id, n, r)
		index := key + ":index"
		readLock := func(c *lock.Client) *lock.Lock { return c.NewRWLock(key).ReadLock() }
		writeLock := func(c *lock.Client) *lock.Lock { return c.NewRWLock(key).WriteLock() }
		if n == "mutex" {
			readLock = func(c *lock.Client) *lock.Lock { return c.NewLock(key) }
			writeLock = readLock
		}
		ctx, cancel := context.WithTimeout(e.ctx, per)
		defer cancel()
		var (
			reads atomic.Int64
			wg    sync.WaitGroup
			errMu sync.Mutex
			first error
		)
		fail := func(err error) {
			if ctx.Err() != nil {
				return // the round ended mid-call
			}
			errMu.Lock()
			if first == nil {
				first = err
			}
			errMu.Unlock()
		}
		for i := range clients * readersPer {
			c, rdb := locks[i%clients], rdbs[i%clients]
			wg.Go(func() {
				for ctx.Err() == nil {
					l := readLock(c)
					if err := l.Acquire(ctx); err != nil {
						fail(err)
						return
					}
					if err := rdb.Get(ctx, index).Err(); err != nil && err != redis.Nil {
						fail(err)
					}
					if work > 0 {
						time.Sleep(work)
					}
					if err := l.Release(context.WithoutCancel(ctx)); err != nil {
						fail(err)
						return
					}
					reads.Add(1)
				}
			})
		}
		var waits []time.Duration
		wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				l := writeLock(locks[0])
				start := time.Now()
				if err := l.Acquire(ctx); err != nil {
					fail(err)
					return
				}
				waits = append(waits, time.Since(start))
				_ = rdbs[0].Set(ctx, index, l.Fence(), 0).Err()
				time.Sleep(2 * time.Millisecond)
				if err := l.Release(context.WithoutCancel(ctx)); err != nil {
					fail(err)
					return
				}
			}
		})
		start := time.Now()
		wg.Wait()
		el := time.Since(start)
		if first != nil {
			return nil, first
		}
		return map[string]float64{
			"reads":  float64(reads.Load()) / el.Seconds(),
			"writes": float64(len(waits)),
			"wwait":  float64(percentile(waits, 0.5)) / float64(time.Millisecond),
		}, nil
	})
	if err != nil {
		return err
	}
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	if work > 0 {
		e.check(id, "rwlock reads/s / mutex reads/s", t.rat("rwlock", "reads"), ">=", 1,
			fmt.Sprintf("%.0f vs %.0f reads/s", t.med("rwlock", "reads"), t.med("mutex", "reads")))
	}
	return nil
}
