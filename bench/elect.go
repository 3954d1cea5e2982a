package main

import (
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// elect: an election's handover on resign, on loopback. A candidate of
// another Client (another go-redis client) waits with a one-hour backoff,
// so only the resign's message can wake it; "handover" counts from just
// before the leader's Resign to the waiting candidate's Campaign
// returning. "ping" is a PING round trip on the same server, the unit the
// goal is stated in (handover p50 under two of them).
func (e *env) elect() error {
	addr := e.servers[0].Addr()
	ardb := redis.NewClient(&redis.Options{Addr: addr})
	brdb := redis.NewClient(&redis.Options{Addr: addr})
	defer ardb.Close()
	defer brdb.Close()
	ca := lock.NewClient(ardb, lock.WithTTL(time.Minute))
	cb := lock.NewClient(brdb, lock.WithTTL(time.Minute), lock.WithBackoff(time.Hour, time.Hour))
	defer ca.Close()
	defer cb.Close()
	n := 1000
	if e.quick {
		n = 200
	}
	t := newTable("ELECT", fmt.Sprintf("Resign → next leader's Campaign returns, loopback, %d per round", n), "",
		column{Key: "ping_p50", Header: "PING p50 µs", Prec: 1},
		column{Key: "handover_p50", Header: "handover p50 µs", Prec: 1},
		column{Key: "handover_p99", Header: "handover p99 µs", Prec: 1},
	)
	a, b := ca.NewElection("elect:bench"), cb.NewElection("elect:bench")
	err := e.interleave(t, e.rounds, []string{"agentlock"}, func(_ int, _ string) (map[string]float64, error) {
		var pings, hands []time.Duration
		for range n {
			p0 := time.Now()
			if err := ardb.Ping(e.ctx).Err(); err != nil {
				return nil, err
			}
			pings = append(pings, time.Since(p0))
			d, err := e.handover(a, b)
			if err != nil {
				return nil, err
			}
			hands = append(hands, d)
			a, b = b, a // the new leader resigns next
		}
		return map[string]float64{"ping_p50": us(percentile(pings, 50)),
			"handover_p50": us(percentile(hands, 50)), "handover_p99": us(percentile(hands, 99))}, nil
	})
	if err != nil {
		return err
	}
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	e.check("ELECT", "handover p50 (PING round trips)", t.med("agentlock", "handover_p50")/t.med("agentlock", "ping_p50"), "<=", 2, "")
	return nil
}

// handover makes a lead (if it does not already), starts b's campaign,
// lets it wait, and times a's Resign to b's Campaign returning.
func (e *env) handover(a, b *lock.Election) (time.Duration, error) {
	if l, err := a.Leader(e.ctx); err != nil || l.Term != a.Term() {
		if err := a.Campaign(e.ctx, "a"); err != nil {
			return 0, fmt.Errorf("campaign: %w", err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- b.Campaign(e.ctx, "b") }()
	// b's first attempt finds a leading and b waits on the channel, whose
	// subscription stays up between rounds; if b were slower, its first
	// attempt would find the key free, still after the resign.
	time.Sleep(2 * time.Millisecond)
	t0 := time.Now()
	if err := a.Resign(e.ctx); err != nil {
		return 0, fmt.Errorf("resign: %w", err)
	}
	if err := <-done; err != nil {
		return 0, fmt.Errorf("campaign: %w", err)
	}
	return time.Since(t0), nil
}
