package main

import (
	"fmt"
	"runtime"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/extra/lockprom"
)

// lockpromImpl is the core with a lockprom Collector, registered as a
// service would, observing every event.
func lockpromImpl() impl {
	col := lockprom.NewCollector()
	prometheus.NewRegistry().MustRegister(col)
	return agentlockImpl("al-lockprom", lock.WithObserver(col))
}

// checkObserverCost records the targets of the Observer's cost in S1: the
// p50 of al-lockprom against agentlock (medians of the same rounds), and
// the allocations of one Release with and without the Collector.
func (e *env) checkObserverCost(t *table, ins map[string]*instance) error {
	e.check("S1", "p50 with lockprom / without", ratioOfRatios(t, "al-lockprom", "agentlock", "p50"), "<=", 1.03,
		fmt.Sprintf("p50 %.1fµs vs %.1fµs", t.med("al-lockprom", "p50"), t.med("agentlock", "p50")))
	with, err := e.releaseAllocs(ins["al-lockprom"])
	if err != nil {
		return err
	}
	without, err := e.releaseAllocs(ins["agentlock"])
	if err != nil {
		return err
	}
	e.check("S1", "allocations per Release, with lockprom - without", with-without, "<=", 0,
		fmt.Sprintf("%.2f vs %.2f", with, without))
	return nil
}

// releaseAllocs is the mean number of heap allocations of one Release of a
// held lock of in, over many (all of this process's, so the background's
// too: the figures are rounded down to whole allocations).
func (e *env) releaseAllocs(in *instance) (float64, error) {
	if in == nil {
		return 0, fmt.Errorf("observer cost: implementation missing")
	}
	const n = 2000
	ms := make([]mutex, n)
	for i := range ms {
		ms[i] = in.newMutex("s1:allocs:" + in.name + ":" + strconv.Itoa(i))
		if ok, err := ms[i].tryAcquire(e.ctx); err != nil || !ok {
			return 0, fmt.Errorf("%s: acquire: ok=%v err=%w", in.name, ok, err)
		}
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for _, m := range ms {
		if err := m.release(e.ctx); err != nil {
			return 0, fmt.Errorf("%s: release: %w", in.name, err)
		}
	}
	runtime.ReadMemStats(&m1)
	return float64((m1.Mallocs - m0.Mallocs) / n), nil
}
