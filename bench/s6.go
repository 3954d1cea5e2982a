package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/agentlock/lock"
)

// s6: heap allocations and bytes per TryAcquire+Release, one goroutine,
// a new lock object per call (NewLock, redislock.Obtain, redsync.NewMutex).
// runtime.MemStats counts every goroutine's allocations, so go-redis's own
// (its connection reader, the renewal loop) are included, as they are in
// a real process.
func (e *env) s6() error {
	impls := []impl{
		floorImpl(),
		bsmImpl(),
		redsyncImpl("redsync", 1),
		agentlockImpl("agentlock"),
		agentlockImpl("al-nofence", lock.WithFencing(false)),
		agentlockImpl("al-watch", lock.WithReleaseMode(lock.ReleaseWatch)),
		agentlockImpl("al-observer", lock.WithObserver(&countingObserver{})),
		agentlockLockTTL("al-lockttl", peerTTL),
	}
	ins, names, closeAll := e.openAll(impls, 1, settings{})
	defer closeAll()
	for _, n := range names {
		if err := warm(e.ctx, ins[n], "s6:"+n, 200); err != nil {
			return err
		}
	}
	ops := 10000
	if e.quick {
		ops = 2000
	}
	t := newTable("S6", fmt.Sprintf("allocations per TryAcquire+Release (%d ops per round)", ops), "redislock",
		column{Key: "allocs", Header: "allocs/op", Prec: 1, Ratio: true},
		column{Key: "bytes", Header: "B/op", Prec: 0, Ratio: true},
	)
	err := e.interleave(t, e.rounds, names, func(_ int, n string) (map[string]float64, error) {
		in := ins[n]
		key := "s6:" + n
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		for range ops {
			m := in.newMutex(key)
			ok, err := m.tryAcquire(e.ctx)
			if err != nil || !ok {
				return nil, fmt.Errorf("acquire: ok=%v err=%w", ok, err)
			}
			if err := m.release(e.ctx); err != nil {
				return nil, fmt.Errorf("release: %w", err)
			}
		}
		runtime.ReadMemStats(&m1)
		return map[string]float64{
			"allocs": float64(m1.Mallocs-m0.Mallocs) / float64(ops),
			"bytes":  float64(m1.TotalAlloc-m0.TotalAlloc) / float64(ops),
		}, nil
	})
	if err != nil {
		return err
	}
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	e.check("S6", "allocs/op / redislock allocs/op", t.rat("agentlock", "allocs"), "<=", 1,
		fmt.Sprintf("%.1f vs %.1f", t.med("agentlock", "allocs"), t.med("redislock", "allocs")))
	e.check("S6", "bytes/op / redislock bytes/op", t.rat("agentlock", "bytes"), "<=", 1,
		fmt.Sprintf("%.0f vs %.0f B", t.med("agentlock", "bytes"), t.med("redislock", "bytes")))
	return nil
}
