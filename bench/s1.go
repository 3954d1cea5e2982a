package main

import (
	"fmt"
	"os"
	"time"

	"github.com/agentlock/lock"
)

// s1Impls are the implementations of the uncontended scenarios: the PING
// reference, the floor, the peers, and agentlock with each costly feature.
func s1Impls() []impl {
	return []impl{
		pingImpl(),
		floorImpl(),
		bsmImpl(),
		redsyncImpl("redsync", 1),
		agentlockImpl("agentlock"),
		agentlockImpl("al-nonotify", lock.WithNotify(false)),
		agentlockImpl("al-watch", lock.WithReleaseMode(lock.ReleaseWatch)),
		agentlockImpl("al-nofence", lock.WithFencing(false)),
		agentlockImpl("al-observer", lock.WithObserver(&countingObserver{})),
		agentlockImpl("al-nocoalesce", lock.WithCoalescing(false)),
		lockpromImpl(),
		agentlockImpl("al-info", lock.WithHolderInfo(true)),
		agentlockImpl("al-audit", lock.WithAudit("s1:audit", 1000)),
	}
}

// s1: uncontended, one goroutine, TryAcquire+Release on its own key.
func (e *env) s1() error {
	ins, names, closeAll := e.openAll(s1Impls(), 1, settings{})
	defer closeAll()
	for _, n := range names {
		if err := warm(e.ctx, ins[n], "s1:"+n, 50); err != nil {
			return err
		}
	}
	rounds, d := e.timed(250*time.Millisecond, time.Second)
	t := newTable("S1", fmt.Sprintf("uncontended, 1 goroutine, TryAcquire+Release, %v per round", d), "floor",
		column{Key: "p50", Header: "p50 µs", Prec: 1, Ratio: true},
		column{Key: "p99", Header: "p99 µs", Prec: 1, Ratio: true},
		column{Key: "ops", Header: "ops/s", Prec: 0, Ratio: true},
		column{Key: "rt_acq", Header: "RT/acq", Prec: 2},
		column{Key: "rt_rel", Header: "RT/rel", Prec: 2},
		column{Key: "srv", Header: "srv CPU µs/op", Prec: 1, Ratio: true},
		column{Key: "cli", Header: "cli CPU µs/op", Prec: 1, Ratio: true},
	)
	err := e.interleave(t, rounds, names, func(_ int, n string) (map[string]float64, error) {
		in := ins[n]
		key := "s1:" + n
		lat := make([]time.Duration, 0, 1<<16)
		var rtAcq, rtRel int64
		srv0, err := serverCPU(e.ctx, e.admin[0])
		if err != nil {
			return nil, err
		}
		cli0 := cpuTime()
		start := time.Now()
		end := start.Add(d)
		for time.Now().Before(end) {
			r0, _ := in.counts()
			t0 := time.Now()
			m := in.newMutex(key)
			ok, err := m.tryAcquire(e.ctx)
			if err != nil || !ok {
				return nil, fmt.Errorf("acquire: ok=%v err=%w", ok, err)
			}
			r1, _ := in.counts()
			if err := m.release(e.ctx); err != nil {
				return nil, fmt.Errorf("release: %w", err)
			}
			lat = append(lat, time.Since(t0))
			r2, _ := in.counts()
			rtAcq += r1 - r0
			rtRel += r2 - r1
		}
		el := time.Since(start)
		cli := cpuTime() - cli0
		srv1, err := serverCPU(e.ctx, e.admin[0])
		if err != nil {
			return nil, err
		}
		ops := float64(len(lat))
		return map[string]float64{
			"p50": us(percentile(lat, 50)), "p99": us(percentile(lat, 99)), "ops": ops / el.Seconds(),
			"rt_acq": float64(rtAcq) / ops, "rt_rel": float64(rtRel) / ops,
			"srv": us(srv1-srv0) / ops, "cli": us(cli) / ops,
		}, nil
	})
	if err != nil {
		return err
	}
	t.Notes = append(t.Notes, "ping is one PING per op: the loopback round trip; RT = go-redis calls (a pipeline counts once)",
		"srv CPU = redis-server user+system CPU (INFO cpu) per op; cli CPU = this process's user+system CPU per op (getrusage)")
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)

	e.check("S1", "round trips per acquire", t.med("agentlock", "rt_acq"), "<=", 1, "")
	e.check("S1", "round trips per release", t.med("agentlock", "rt_rel"), "<=", 1, "")
	e.check("S1", "p50 / floor p50", t.rat("agentlock", "p50"), "<=", 1.05,
		fmt.Sprintf("p50 %.1fµs vs floor %.1fµs", t.med("agentlock", "p50"), t.med("floor", "p50")))
	e.check("S1", "p50 / redislock p50", ratioOfRatios(t, "agentlock", "redislock", "p50"), "<=", 1.0,
		fmt.Sprintf("p50 %.1fµs vs %.1fµs", t.med("agentlock", "p50"), t.med("redislock", "p50")))
	e.check("S1", "ops/s / redislock ops/s", ratioOfRatios(t, "agentlock", "redislock", "ops"), ">=", 1.0,
		fmt.Sprintf("%.0f vs %.0f ops/s", t.med("agentlock", "ops"), t.med("redislock", "ops")))
	e.check("S2*", "stretch: S1 p50 with coalescing / without", ratioOfRatios(t, "agentlock", "al-nocoalesce", "p50"), "<=", 1.05,
		fmt.Sprintf("p50 %.1fµs vs %.1fµs (al-nocoalesce)", t.med("agentlock", "p50"), t.med("al-nocoalesce", "p50")))
	return e.checkObserverCost(t, ins)
}

// ratioOfRatios is the median over rounds of a's key divided by b's key.
func ratioOfRatios(t *table, a, b, key string) float64 {
	ra, rb := t.Rows[a], t.Rows[b]
	if ra == nil || rb == nil {
		return ratio(1, 0)
	}
	var xs []float64
	for i := range min(len(ra.Rounds), len(rb.Rounds)) {
		xs = append(xs, ratio(float64(ra.Rounds[i][key]), float64(rb.Rounds[i][key])))
	}
	return median(xs)
}
