package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
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
		column{Key: "rt_ideal", Header: "Σ⌈n/500⌉", Prec: 0},
		column{Key: "rt_max", Header: "max RT/tick", Prec: 0},
		column{Key: "cpu_tick", Header: "CPU ms/tick", Prec: 2},
		column{Key: "cpu_lock", Header: "CPU µs/renewal", Prec: 2},
		column{Key: "heap", Header: "heap B/lock", Prec: 0},
		column{Key: "lost", Header: "lost", Prec: 0},
	)
	for _, n := range sizes {
		if err := e.ctx.Err(); err != nil {
			return err
		}
		m, err := e.s7Run(n, ttl)
		if err != nil {
			return fmt.Errorf("N=%d: %w", n, err)
		}
		r := t.row("N=" + strconv.Itoa(n))
		r.Rounds = append(r.Rounds, numMap(m))
		e.flush()
		e.check("S7", fmt.Sprintf("N=%d: locks lost", n), m["lost"], "<=", 0, "")
		e.check("S7", fmt.Sprintf("N=%d: max round trips in a tick / ⌈N/500⌉", n), m["rt_max"]/math.Ceil(float64(n)/renewChunk), "<=", 1,
			fmt.Sprintf("%.0f ticks, %.0f RT for %.0f renewals", m["ticks"], m["rt"], m["renewed"]*float64(n)))
		e.check("S7", fmt.Sprintf("N=%d: heap bytes per held lock", n), m["heap"], "<=", 1024, "")
		e.check("S7", fmt.Sprintf("N=%d: every lock renewed twice in the window", n), m["renewed"], ">=", 2, "")
	}
	t.summarize()
	t.Notes = append(t.Notes,
		"a tick is a burst of renewal pipelines (gaps under TTL/24 join one burst); Σ⌈n/500⌉ sums ⌈renewals/500⌉ over ticks",
		"CPU = getrusage user+system of the whole process over the window (the renewal loop and go-redis), per tick and per renewal",
		"heap = HeapAlloc after GC, loaded minus before, per lock, including the *lock.Lock handle the harness keeps; fencing on (default)")
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	return nil
}

func (e *env) s7Run(n int, ttl time.Duration) (map[string]float64, error) {
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
			return nil, err
		}
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
		return nil, e.ctx.Err()
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
	ticks, renewals, ideal, maxRT := groupTicks(pipes, ttl/24)
	return map[string]float64{
		"load_s":   load.Seconds(),
		"ticks":    float64(ticks),
		"renewed":  float64(renewals) / float64(n),
		"rt":       float64(rt1 - rt0),
		"rt_ideal": float64(ideal),
		"rt_max":   float64(maxRT),
		"cpu_tick": msf(cpu) / float64(max(ticks, 1)),
		"cpu_lock": us(cpu) / float64(max(renewals, 1)),
		"heap":     heap,
		"lost":     float64(lost),
	}, nil
}

// groupTicks splits pipelines into bursts separated by more than gap and
// returns the bursts, the commands sent, Σ⌈commands/500⌉ over bursts, and
// the most pipelines in one burst.
func groupTicks(pipes []pipeEvent, gap time.Duration) (ticks, cmds, ideal, maxRT int) {
	slices.SortFunc(pipes, func(a, b pipeEvent) int { return a.at.Compare(b.at) })
	var tickCmds, tickRT int
	flush := func() {
		if tickRT == 0 {
			return
		}
		ticks++
		ideal += (tickCmds + renewChunk - 1) / renewChunk
		maxRT = max(maxRT, tickRT)
		tickCmds, tickRT = 0, 0
	}
	for i, p := range pipes {
		if i > 0 && p.at.Sub(pipes[i-1].at) > gap {
			flush()
		}
		tickCmds += p.cmds
		tickRT++
		cmds += p.cmds
	}
	flush()
	return ticks, cmds, ideal, maxRT
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
