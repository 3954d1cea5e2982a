package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/agentlock/lock"
)

const s2Goroutines = 64

// s2: uncontended, 64 goroutines each on its own key.
func (e *env) s2() error {
	impls := []impl{
		pingImpl(),
		floorImpl(),
		bsmImpl(),
		redsyncImpl("redsync", 1),
		agentlockImpl("agentlock"),
		agentlockImpl("al-nofence", lock.WithFencing(false)),
		agentlockImpl("al-nocoalesce", lock.WithCoalescing(false)),
	}
	ins, names, closeAll := e.openAll(impls, 1, settings{})
	defer closeAll()
	for _, n := range names {
		if err := warm(e.ctx, ins[n], "s2:"+n, 50); err != nil {
			return err
		}
	}
	rounds, d := e.timed(300*time.Millisecond, time.Second)
	t := newTable("S2", fmt.Sprintf("uncontended, %d goroutines on distinct keys, %v per round", s2Goroutines, d), "floor",
		column{Key: "ops", Header: "ops/s", Prec: 0, Ratio: true},
		column{Key: "p50", Header: "p50 µs", Prec: 1, Ratio: true},
		column{Key: "p99", Header: "p99 µs", Prec: 1, Ratio: true},
		column{Key: "rt_op", Header: "RT/op", Prec: 2},
		column{Key: "errs", Header: "errors", Prec: 0},
	)
	err := e.interleave(t, rounds, names, func(_ int, n string) (map[string]float64, error) {
		in := ins[n]
		keys := make([]string, s2Goroutines)
		for g := range keys {
			keys[g] = "s2:" + n + ":" + strconv.Itoa(g)
		}
		return loadRound(in, s2Goroutines, d, func(g int) error {
			m := in.newMutex(keys[g])
			// A failed call (go-redsync gives each one 5% of its TTL)
			// is counted, not timed, and the goroutine moves to a new
			// key in case the failure left the old one held.
			ok, err := m.tryAcquire(e.ctx)
			if err == nil && ok {
				err = m.release(e.ctx)
			} else if err == nil {
				err = errNotHeld
			}
			if err != nil {
				keys[g] += "+"
			}
			return err
		}), nil
	})
	if err != nil {
		return err
	}
	t.Notes = append(t.Notes, "every implementation has its own go-redis client with default options (pool 10×GOMAXPROCS)")
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	e.check("S2", "ops/s / floor ops/s", t.rat("agentlock", "ops"), ">=", 0.95,
		fmt.Sprintf("%.0f vs %.0f ops/s", t.med("agentlock", "ops"), t.med("floor", "ops")))
	e.check("S2*", "stretch: ops/s / floor ops/s", t.rat("agentlock", "ops"), ">=", 1.3, "coalescing")
	return nil
}
