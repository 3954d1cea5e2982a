package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// force: the time from an operator's ForceRelease (another Client, another
// go-redis client) to the holder's Lost() closing, on loopback. The holder
// hears it on the force channel (pub/sub), long before its next
// renewal (TTL 30s). "call" is the ForceRelease round trip alone; "lost"
// counts from just before the call to Lost(); "after" from the call's
// return to Lost() (0 when Lost closed first).
func (e *env) force() error {
	addr := e.servers[0].Addr()
	hrdb := redis.NewClient(&redis.Options{Addr: addr})
	ordb := redis.NewClient(&redis.Options{Addr: addr})
	defer hrdb.Close()
	defer ordb.Close()
	holder, op := lock.NewClient(hrdb), lock.NewClient(ordb)
	defer holder.Close()
	defer op.Close()
	n := 2000
	if e.quick {
		n = 300
	}
	t := newTable("FORCE", fmt.Sprintf("ForceRelease → holder's Lost(), loopback, %d per round", n), "",
		column{Key: "call_p50", Header: "call p50 µs", Prec: 1},
		column{Key: "lost_p50", Header: "lost p50 µs", Prec: 1},
		column{Key: "lost_p99", Header: "lost p99 µs", Prec: 1},
		column{Key: "lost_max", Header: "lost max µs", Prec: 1},
		column{Key: "after_p99", Header: "after p99 µs", Prec: 1},
	)
	// The first hold subscribes the force channel; the warm-up waits for its loss
	// by message, not by renewal (whose first look comes after 10s).
	for range 20 {
		if _, _, _, err := e.forceOnce(holder, op, "force:warm"); err != nil {
			return err
		}
	}
	err := e.interleave(t, e.rounds, []string{"agentlock"}, func(_ int, _ string) (map[string]float64, error) {
		var calls, losts, afters []time.Duration
		for range n {
			call, lost, after, err := e.forceOnce(holder, op, "force:bench")
			if err != nil {
				return nil, err
			}
			calls, losts, afters = append(calls, call), append(losts, lost), append(afters, after)
		}
		return map[string]float64{
			"call_p50": us(percentile(calls, 50)), "lost_p50": us(percentile(losts, 50)),
			"lost_p99": us(percentile(losts, 99)), "lost_max": us(percentile(losts, 100)),
			"after_p99": us(percentile(afters, 99)),
		}, nil
	})
	if err != nil {
		return err
	}
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	e.check("FORCE", "ForceRelease→Lost p99 (ms)", t.med("agentlock", "lost_p99")/1000, "<=", 10, "")
	return nil
}

// forceOnce takes key with holder, force-releases it with op and waits for
// the holder's Lost().
func (e *env) forceOnce(holder, op *lock.Client, key string) (call, lost, after time.Duration, err error) {
	l := holder.NewLock(key)
	if err := l.Acquire(e.ctx); err != nil {
		return 0, 0, 0, fmt.Errorf("acquire: %w", err)
	}
	t0 := time.Now()
	if err := op.ForceRelease(e.ctx, key); err != nil {
		return 0, 0, 0, fmt.Errorf("force release: %w", err)
	}
	t1 := time.Now()
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	select {
	case <-l.Lost():
	case <-ctx.Done():
		return 0, 0, 0, fmt.Errorf("lost() not closed within 5s of a force-release")
	}
	t2 := time.Now()
	return t1.Sub(t0), t2.Sub(t0), max(0, t2.Sub(t1)), nil
}
