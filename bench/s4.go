package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/agentlock/lock"
)

// s4: the holder crashes (stops renewing, never releases); how long after
// its last renewal does a waiter hold the lock?
func (e *env) s4() error {
	ttl := e.dur(500*time.Millisecond, time.Second)
	impls := []impl{floorImpl(), bsmImpl(), redsyncImpl("redsync", 1), agentlockImpl("agentlock")}
	ins, names, closeAll := e.openAll(impls, 1, settings{ttl: ttl})
	defer closeAll()
	for _, n := range names {
		if err := warm(e.ctx, ins[n], "s4:warm:"+n, 10); err != nil {
			return err
		}
	}
	t := newTable("S4", fmt.Sprintf("holder crash, TTL %v: from the holder's last renewal to a waiter holding", ttl), "floor",
		column{Key: "ms", Header: "wait ms", Prec: 1, Ratio: true},
		column{Key: "over", Header: "ms over TTL", Prec: 1},
		column{Key: "frac", Header: "× TTL", Prec: 3},
	)
	err := e.interleave(t, e.rounds, names, func(r int, n string) (map[string]float64, error) {
		key := "s4:" + n + ":" + strconv.Itoa(r)
		var crash func() time.Time
		if n == "agentlock" {
			c, err := e.s4AgentlockHolder(key, ttl)
			if err != nil {
				return nil, err
			}
			crash = c
		} else {
			at := time.Now()
			ok, err := ins[n].newMutex(key).tryAcquire(e.ctx)
			if err == nil && !ok {
				err = fmt.Errorf("holder: not acquired")
			}
			if err != nil {
				return nil, err
			}
			crash = func() time.Time { return at }
		}
		type result struct {
			at  time.Time
			err error
		}
		done := make(chan result, 1)
		go func() {
			got, err := waitFor(e.ctx, ins[n], key, 10*ttl)
			done <- result{got, err}
		}()
		last := crash()
		res := <-done
		if res.err != nil {
			return nil, res.err
		}
		got := res.at
		w := got.Sub(last)
		return map[string]float64{
			"ms": msf(w), "over": msf(w - ttl), "frac": float64(w) / float64(ttl),
		}, nil
	})
	if err != nil {
		return err
	}
	t.Notes = append(t.Notes,
		"agentlock's holder is its own Client on its own connection: it holds for 1.5×TTL (renewing at TTL/3), then Close stops renewal without releasing; its last renewal is the last call its connection sent. The others' holders acquire once and stop. Waiters start at the holder's acquisition.")
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	e.check("S4", "waiter holds within TTL + 20ms of the last renewal (ms over TTL)", t.med("agentlock", "over"), "<=", 20,
		fmt.Sprintf("%.3f × TTL", t.med("agentlock", "frac")))
	return nil
}

// s4AgentlockHolder acquires key on a Client of its own and returns crash,
// which lets it renew for 1.5×TTL, then closes that Client (renewal stops,
// the key stays until its TTL runs out) and returns when its connection
// sent its last call: the last renewal.
func (e *env) s4AgentlockHolder(key string, ttl time.Duration) (crash func() time.Time, err error) {
	rdb, ctr := newClient(e.servers[0].Addr())
	hc := lock.NewClient(rdb, lock.WithTTL(ttl))
	if err := hc.NewLock(key).Acquire(e.ctx); err != nil {
		_ = hc.Close()
		_ = rdb.Close()
		return nil, fmt.Errorf("holder: %w", err)
	}
	return func() time.Time {
		time.Sleep(ttl * 3 / 2)
		_ = hc.Close()
		_ = rdb.Close()
		return ctr.lastSent()
	}, nil
}

// waitFor acquires key with a blocking acquire of in and returns when it
// was held. The lock is released afterwards.
func waitFor(ctx context.Context, in *instance, key string, budget time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	m := in.newMutex(key)
	if err := m.acquire(ctx); err != nil {
		return time.Time{}, fmt.Errorf("waiter: %w", err)
	}
	got := time.Now()
	_ = m.release(context.WithoutCancel(ctx))
	return got, nil
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
