package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// once: the stampede Client.Once exists for. 64 goroutines over 8 Clients
// (8 processes' worth: each Client has its own go-redis client) ask at the
// same instant for one key nobody has computed; fn takes onceFn. Measured
// per round, on a fresh key (so every wake-up subscription starts cold, as
// in a real stampede): the time until every caller has the value, the round
// trips and commands the callers sent (go-redis hooks), and every command
// the server ran (INFO commandstats: scripts and the calls inside them).
// "÷ (fn + RTT)" divides the time by fn's measured duration (a 20ms sleep
// lasts a little longer on a loaded machine) plus the median PING.
// "hand-written" is the double-checked fill the examples used before Once:
// GET, then WithLock, GET again, fn, SET.
const (
	onceClients = 8
	onceCallers = 64
	onceFn      = 20 * time.Millisecond
)

func (e *env) once() error {
	rtt, err := e.pingRTT()
	if err != nil {
		return err
	}
	type side struct {
		rdbs  []*redis.Client
		ctrs  []*counter
		locks []*lock.Client
	}
	sides := map[string]*side{}
	names := []string{"once", "hand-written"}
	for _, n := range names {
		s := &side{}
		for range onceClients {
			rdb, c := newClient(e.servers[0].Addr())
			s.rdbs, s.ctrs = append(s.rdbs, rdb), append(s.ctrs, c)
			s.locks = append(s.locks, lock.NewClient(rdb))
		}
		sides[n] = s
		defer func() {
			for i := range s.locks {
				_ = s.locks[i].Close()
				_ = s.rdbs[i].Close()
			}
		}()
	}
	call := func(n string, i int, key string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
		s := sides[n]
		if n == "once" {
			v, _, err := s.locks[i].Once(e.ctx, key, fn)
			return v, err
		}
		return handWritten(e.ctx, s.locks[i], s.rdbs[i], key, fn)
	}
	// Warm up: dial every connection and load every script.
	for _, n := range names {
		for i := range onceClients {
			if _, err := call(n, i, fmt.Sprintf("once:warm:%s:%d", n, i), func(context.Context) ([]byte, error) { return []byte("w"), nil }); err != nil {
				return fmt.Errorf("%s: warm-up: %w", n, err)
			}
		}
	}
	rounds := 3 * e.rounds
	if e.quick {
		rounds = e.rounds
	}
	t := newTable("ONCE", fmt.Sprintf("stampede: %d goroutines over %d Clients ask for one missing key at once; fn takes %v; ping RTT %v",
		onceCallers, onceClients, onceFn, rtt.Round(time.Microsecond)), "hand-written",
		column{Key: "ms", Header: "ms until all have it", Prec: 2, Ratio: true},
		column{Key: "x", Header: "÷ (fn + RTT)", Prec: 3},
		column{Key: "fn", Header: "fn ms", Prec: 2},
		column{Key: "rt", Header: "round trips/caller", Prec: 3, Ratio: true},
		column{Key: "cmds", Header: "commands sent/caller", Prec: 3, Ratio: true},
		column{Key: "srv", Header: "server calls/caller", Prec: 3, Ratio: true},
		column{Key: "rtc", Header: "round trips/Client", Prec: 2},
		column{Key: "runs", Header: "fn runs", Prec: 0},
	)
	err = e.interleave(t, rounds, names, func(round int, n string) (map[string]float64, error) {
		s := sides[n]
		key := fmt.Sprintf("once:%s:%d", n, round)
		var rt0, cmd0 int64
		for _, c := range s.ctrs {
			r, m := c.snapshot()
			rt0, cmd0 = rt0+r, cmd0+m
		}
		st0, err := readStats(e.ctx, e.admin[0], "commandstats")
		if err != nil {
			return nil, err
		}
		var runs, fnTook atomic.Int64
		fn := func(ctx context.Context) ([]byte, error) {
			runs.Add(1)
			t0 := time.Now()
			time.Sleep(onceFn) // the work: a model call, a payment
			fnTook.Store(int64(time.Since(t0)))
			return []byte("answer for " + key), nil
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, onceCallers)
		for i := range onceCallers {
			wg.Go(func() {
				<-start
				v, err := call(n, i%onceClients, key, fn)
				if err == nil && string(v) != "answer for "+key {
					err = fmt.Errorf("got %q", v)
				}
				errs[i] = err
			})
		}
		t0 := time.Now()
		close(start)
		wg.Wait()
		el := time.Since(t0)
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		st1, err := readStats(e.ctx, e.admin[0], "commandstats")
		if err != nil {
			return nil, err
		}
		var rt1, cmd1 int64
		for _, c := range s.ctrs {
			r, m := c.snapshot()
			rt1, cmd1 = rt1+r, cmd1+m
		}
		return map[string]float64{
			"ms":   float64(el) / float64(time.Millisecond),
			"x":    float64(el) / float64(time.Duration(fnTook.Load())+rtt),
			"rt":   float64(rt1-rt0) / onceCallers,
			"cmds": float64(cmd1-cmd0) / onceCallers,
			"srv":  float64(st1.since(st0).calls()) / onceCallers,
			"rtc":  float64(rt1-rt0) / onceClients,
			"runs": float64(runs.Load()),
			"fn":   float64(fnTook.Load()) / float64(time.Millisecond),
		}, nil
	})
	if err != nil {
		return err
	}
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	e.check("ONCE", "fn runs per stampede (once)", t.med("once", "runs"), "==", 1, "")
	e.check("ONCE", "round trips per caller (once)", t.med("once", "rt"), "<=", 2,
		fmt.Sprintf("%.2f per Client", t.med("once", "rtc")))
	e.check("ONCE", "time until all have it ÷ (fn + RTT) (once)", t.med("once", "x"), "<=", 1.2,
		fmt.Sprintf("%.2f ms for fn %v + RTT %v", t.med("once", "ms"), onceFn, rtt.Round(time.Microsecond)))
	return nil
}

// pingRTT returns the median of 201 PINGs' round trips on the first server.
func (e *env) pingRTT() (time.Duration, error) {
	ds := make([]time.Duration, 201)
	for i := range ds {
		t0 := time.Now()
		if err := e.admin[0].Ping(e.ctx).Err(); err != nil {
			return 0, err
		}
		ds[i] = time.Since(t0)
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

// handWritten is the double-checked cache fill written by hand over
// WithLock: look, lock, look again, compute, store, unlock.
func handWritten(ctx context.Context, locks *lock.Client, rdb *redis.Client, key string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	ck := "cache:" + key
	v, err := rdb.Get(ctx, ck).Bytes()
	if err == nil || !errors.Is(err, redis.Nil) {
		return v, err
	}
	err = locks.WithLock(ctx, key, func(ctx context.Context) error {
		if v, err = rdb.Get(ctx, ck).Bytes(); err == nil || !errors.Is(err, redis.Nil) {
			return err
		}
		if v, err = fn(ctx); err != nil {
			return err
		}
		return rdb.Set(ctx, ck, v, 10*time.Minute).Err()
	})
	return v, err
}
