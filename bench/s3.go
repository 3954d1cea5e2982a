package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

const (
	s3Goroutines = 8
	s3Hold       = time.Millisecond
	s3Patience   = 10 * time.Second // one Acquire's budget; failing it is a give-up
)

// s3: 8 goroutines on one key, Acquire → hold 1 ms → Release.
func (e *env) s3() error {
	impls := []impl{
		floorImpl(),
		bsmImpl(),
		redsyncImpl("redsync", 1),
		redsyncImpl("redsync-1ms", 1, redsync.WithRetryDelay(time.Millisecond)),
		agentlockImpl("agentlock"),
		agentlockImpl("al-nonotify", lock.WithNotify(false)),
		agentlockSpread("al-8clients", s3Goroutines),
	}
	ins, names, closeAll := e.openAll(impls, 1, settings{})
	defer closeAll()
	for _, n := range names {
		if err := warm(e.ctx, ins[n], "s3:"+n, 20); err != nil {
			return err
		}
	}
	rounds, d := e.timed(600*time.Millisecond, 2100*time.Millisecond)
	t := newTable("S3", fmt.Sprintf("contended: %d goroutines on one key, hold %v, %v per round", s3Goroutines, s3Hold, d), "floor",
		contendedColumns()...)
	err := e.interleave(t, rounds, names, func(_ int, n string) (map[string]float64, error) {
		return e.s3Round(ins[n], "s3:"+n, d)
	})
	if err != nil {
		return err
	}
	t.Notes = append(t.Notes,
		"gap = from one Release returning to the next Acquire returning (0 when the Acquire returned first)",
		"cmds/cs = commands the clients sent per critical section (go-redis hook); srv cmds/cs = INFO commandstats delta, which also counts the commands run inside Lua scripts",
		"al-8clients: each lock comes from one of 8 Clients in turn, so waiters sit in different Clients as in 8 processes: releases reach them by pub/sub, not by a handoff inside one Client",
		"gap/PING: gap p50 over the p50 of 300 PINGs sent just before the same round")
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	e.check("S3", "critical sections/s / polling floor", t.rat("agentlock", "cs"), ">=", 1.0,
		fmt.Sprintf("%.0f vs %.0f /s", t.med("agentlock", "cs"), t.med("floor", "cs")))
	e.check("S3", "commands sent per critical section", t.med("agentlock", "cmds"), "<=", 3, "")
	e.check("S3", "handoff gap p50 / PING p50", t.med("agentlock", "gap_ping"), "<=", 3,
		fmt.Sprintf("gap p50 %.0fµs", t.med("agentlock", "gap50")))
	e.check("S3", "fairness min/max sections per goroutine", t.med("agentlock", "fair"), ">=", 0.7, "")
	e.check("S3", "give-ups", t.med("agentlock", "giveups"), "<=", 0, "")
	return nil
}

// s3Round runs one implementation for d and measures it.
func (e *env) s3Round(in *instance, key string, d time.Duration) (map[string]float64, error) {
	admin := e.admin[0]
	// The PING round trip of this very moment: the handoff target is
	// relative to it, and a shared machine's speed drifts.
	ping := pingP50(e.ctx, admin, 300)
	if err := admin.ConfigResetStat(e.ctx).Err(); err != nil {
		return nil, err
	}
	_, c0 := in.counts()
	a0, r0 := in.phaseRT(phaseAcquire), in.phaseRT(phaseRelease)
	var (
		mu       sync.Mutex
		acqAt    []time.Time
		relAt    []time.Time
		giveups  int
		firstErr error
	)
	per := make([]int, s3Goroutines)
	ctx, cancel := context.WithTimeout(e.ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for g := range s3Goroutines {
		wg.Go(func() {
			for ctx.Err() == nil {
				m := in.newMutex(key)
				actx, acancel := context.WithTimeout(withPhase(ctx, phaseAcquire), s3Patience)
				err := m.acquire(actx)
				acancel()
				now := time.Now()
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						giveups++
						mu.Unlock()
					}
					continue
				}
				mu.Lock()
				acqAt = append(acqAt, now)
				mu.Unlock()
				per[g]++
				time.Sleep(s3Hold)
				err = m.release(withPhase(context.WithoutCancel(ctx), phaseRelease))
				now = time.Now()
				mu.Lock()
				relAt = append(relAt, now)
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("release: %w", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	_, c1 := in.counts()
	a1, r1 := in.phaseRT(phaseAcquire), in.phaseRT(phaseRelease)
	srv, err := commandCalls(e.ctx, admin)
	if err != nil {
		return nil, err
	}
	sections := float64(len(acqAt))
	if sections == 0 {
		return map[string]float64{"cs": 0, "giveups": float64(giveups)}, nil
	}
	slices.SortFunc(acqAt, func(a, b time.Time) int { return a.Compare(b) })
	slices.SortFunc(relAt, func(a, b time.Time) int { return a.Compare(b) })
	var gaps []time.Duration
	for i := 0; i+1 < len(acqAt) && i < len(relAt); i++ {
		gaps = append(gaps, max(acqAt[i+1].Sub(relAt[i]), 0))
	}
	lo, hi := slices.Min(per), slices.Max(per)
	return map[string]float64{
		"cs":       sections / d.Seconds(),
		"gap50":    us(percentile(gaps, 50)),
		"gap99":    us(percentile(gaps, 99)),
		"gap_ping": ratio(us(percentile(gaps, 50)), ping),
		"cmds":     float64(c1-c0) / sections,
		"rt_acq":   float64(a1-a0) / sections,
		"rt_rel":   float64(r1-r0) / sections,
		"srv":      float64(srv) / sections,
		"fair":     ratio(float64(lo), float64(hi)),
		"giveups":  float64(giveups),
	}, nil
}

// contendedColumns are the columns of a table of s3Round's figures.
func contendedColumns() []column {
	return []column{
		{Key: "cs", Header: "sections/s", Prec: 0, Ratio: true},
		{Key: "gap50", Header: "gap p50 µs", Prec: 0},
		{Key: "gap99", Header: "gap p99 µs", Prec: 0},
		{Key: "gap_ping", Header: "gap/PING", Prec: 2},
		{Key: "cmds", Header: "cmds/cs", Prec: 2},
		{Key: "rt_acq", Header: "RT/acq", Prec: 2},
		{Key: "rt_rel", Header: "RT/rel", Prec: 2},
		{Key: "srv", Header: "srv cmds/cs", Prec: 2},
		{Key: "fair", Header: "min/max", Prec: 2},
		{Key: "giveups", Header: "give-ups", Prec: 0},
	}
}

// pingP50 returns the p50 of n PING round trips, in µs.
func pingP50(ctx context.Context, rdb *redis.Client, n int) float64 {
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if rdb.Ping(ctx).Err() != nil {
			break
		}
		lat = append(lat, time.Since(t0))
	}
	return us(percentile(lat, 50))
}
