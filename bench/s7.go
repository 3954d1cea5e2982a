package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentlock/lock"
)

const renewChunk = 500 // the bound: ⌈N/500⌉ round trips per tick

// s7: one Client holding N locks; what does renewal cost?
func (e *env) s7() error {
	sizes := []int{10_000, 100_000}
	ttl := 6 * time.Second
	if e.quick {
		sizes, ttl = []int{10_000}, 3*time.Second
	}
	t := newTable("S7", fmt.Sprintf("renewal at scale: one Client, TTL %v (renewal every %v), window of one TTL after loading", ttl, ttl/3), "",
		column{Key: "load_s", Header: "load s", Prec: 1},
		column{Key: "ticks", Header: "ticks", Prec: 0},
		column{Key: "renewed", Header: "renewals/lock", Prec: 2},
		column{Key: "rt", Header: "RT", Prec: 0},
		column{Key: "rt_renew", Header: "renewal RT", Prec: 0},
		column{Key: "rt_ideal", Header: "Σ⌈n/500⌉", Prec: 0},
		column{Key: "rt_period", Header: "renewal RT/period", Prec: 1},
		column{Key: "batch", Header: "renewals/RT", Prec: 0},
		column{Key: "cpu_tick", Header: "CPU ms/tick", Prec: 2},
		column{Key: "cpu_lock", Header: "CPU µs/renewal", Prec: 2},
		column{Key: "heap", Header: "heap B/lock", Prec: 0},
		column{Key: "lost", Header: "lost", Prec: 0},
	)
	for _, n := range sizes {
		if err := e.ctx.Err(); err != nil {
			return err
		}
		m, m7detail, err := e.s7Run(n, ttl)
		if err != nil {
			return fmt.Errorf("s7 with %d locks: %w", n, err)
		}
		r := t.row("N=" + strconv.Itoa(n))
		r.Rounds = append(r.Rounds, numMap(m))
		e.flush()
		e.check("S7", fmt.Sprintf("N=%d: locks lost", n), m["lost"], "<=", 0, "")
		e.check("S7", fmt.Sprintf("N=%d: renewal round trips / Σ over ticks ⌈renewed/500⌉", n), m["rt_renew"]/m["rt_ideal"], "<=", 1,
			fmt.Sprintf("%.1f RT per renewal period (⌈N/500⌉ = %.0f); %.0f ticks in the window", m["rt_period"], math.Ceil(float64(n)/renewChunk), m["ticks"]))
		for i, d := range m7detail {
			if i < 8 {
				t.Notes = append(t.Notes, fmt.Sprintf("N=%d tick %d: %s", n, i+1, d))
			}
		}
		e.check("S7", fmt.Sprintf("N=%d: heap bytes per held lock", n), m["heap"], "<=", 1024, "")
		e.check("S7", fmt.Sprintf("N=%d: every lock renewed twice in the window", n), m["renewed"], ">=", 2, "")
	}
	t.summarize()
	t.Notes = append(t.Notes,
		"a tick is a burst of renewal pipelines (gaps under TTL/24 join one burst); Σ⌈n/500⌉ sums ⌈renewals/500⌉ over ticks; RT counts every round trip in the window, including new connections' handshakes, which the tick columns leave out",
		"CPU = getrusage user+system of the whole process over the window (the renewal loop and go-redis), per tick and per renewal",
		"heap = HeapAlloc after GC, loaded minus before, per lock, including the *lock.Lock handle the harness keeps; fencing on (default)")
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	return nil
}

// s7Run loads n locks, watches renewal for one TTL and returns the
// metrics and a description of each tick.
func (e *env) s7Run(n int, ttl time.Duration) (map[string]float64, []string, error) {
	rdb, ctr := newClient(e.servers[0].Addr())
	defer rdb.Close()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	c := lock.NewClient(rdb, lock.WithTTL(ttl))
	defer c.Close()

	locks := make([]*lock.Lock, n)
	const loaders = 64
	var wg sync.WaitGroup
	errs := make([]error, loaders)
	start := time.Now()
	for g := range loaders {
		wg.Go(func() {
			for i := g; i < n; i += loaders {
				l := c.NewLock("s7:" + strconv.Itoa(i))
				ok, err := l.TryAcquire(e.ctx)
				if err != nil || !ok {
					errs[g] = fmt.Errorf("load %d: ok=%v err=%w", i, ok, err)
					return
				}
				locks[i] = l
			}
		})
	}
	wg.Wait()
	load := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	// Renewal runs the extend script, which no acquire has loaded yet: the
	// first tick would find it missing (NOSCRIPT) and send its chunks again
	// by EVAL. One Extend loads it, so the window sees the steady state.
	if err := locks[0].Extend(e.ctx, ttl); err != nil {
		return nil, nil, fmt.Errorf("extend: %w", err)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	heap := (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / float64(n)

	ctr.mu.Lock()
	ctr.pipes = nil
	ctr.mu.Unlock()
	ctr.logPipe.Store(true)
	cpu0 := cpuTime()
	rt0, _ := ctr.snapshot()
	select {
	case <-time.After(ttl):
	case <-e.ctx.Done():
		return nil, nil, e.ctx.Err()
	}
	cpu := cpuTime() - cpu0
	rt1, _ := ctr.snapshot()
	ctr.logPipe.Store(false)
	ctr.mu.Lock()
	pipes := slices.Clone(ctr.pipes)
	ctr.mu.Unlock()

	lost := 0
	for _, l := range locks {
		select {
		case <-l.Lost():
			lost++
		default:
		}
	}
	ticks, renewals, ideal, renewRT, detail := groupTicksDetail(pipes, ttl/24)
	periods := float64(renewals) / float64(n)
	return map[string]float64{
		"load_s":    load.Seconds(),
		"ticks":     float64(ticks),
		"renewed":   float64(renewals) / float64(n),
		"rt":        float64(rt1 - rt0),
		"rt_ideal":  float64(ideal),
		"rt_renew":  float64(renewRT),
		"rt_period": float64(renewRT) / max(periods, 1e-9),
		"batch":     float64(renewals) / float64(max(renewRT, 1)),
		"cpu_tick":  msf(cpu) / float64(max(ticks, 1)),
		"cpu_lock":  us(cpu) / float64(max(renewals, 1)),
		"heap":      heap,
		"lost":      float64(lost),
	}, detail, nil
}

// groupTicksDetail splits the script pipelines into bursts separated by more than gap and
// returns the bursts, the commands sent, Σ⌈commands/500⌉ over bursts, the
// script pipelines, and each burst as "pipelines RT/commands [sizes]".
func groupTicksDetail(pipes []pipeEvent, gap time.Duration) (ticks, cmds, ideal, rts int, detail []string) {
	slices.SortFunc(pipes, func(a, b pipeEvent) int { return a.at.Compare(b.at) })
	var tickCmds, tickRT int
	var sizes []string
	flush := func() {
		if tickRT == 0 {
			return
		}
		detail = append(detail, fmt.Sprintf("%d RT/%d cmds [%s]", tickRT, tickCmds, strings.Join(sizes, " ")))
		sizes = nil
		ticks++
		ideal += (tickCmds + renewChunk - 1) / renewChunk
		rts += tickRT
		tickCmds, tickRT = 0, 0
	}
	var prev time.Time
	for _, p := range pipes {
		if !p.script {
			continue // a new connection's handshake, not a renewal
		}
		if !prev.IsZero() && p.at.Sub(prev) > gap {
			flush()
		}
		prev = p.at
		tickCmds += p.cmds
		tickRT++
		sizes = append(sizes, strconv.Itoa(p.cmds))
		cmds += p.cmds
	}
	flush()
	return ticks, cmds, ideal, rts, detail
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
