package main

import (
	"fmt"
	"os"
	"time"

	"github.com/agentlock/lock"
)

// fair: the fair lock against the plain mutex, 8 waiters spread over 8
// Clients (as 8 processes), one key, hold 1 ms: the handoff gap, the
// commands per critical section and fairness (min/max sections per
// goroutine). The rounds are S3's.
func (e *env) fair() error {
	impls := []impl{
		floorImpl(),
		agentlockSpread("al-8clients", s3Goroutines),
		agentlockSpread("al-fair-8clients", s3Goroutines, lock.WithFair(true)),
	}
	ins, names, closeAll := e.openAll(impls, 1, settings{})
	defer closeAll()
	for _, n := range names {
		if err := warm(e.ctx, ins[n], "fair:"+n, 20); err != nil {
			return err
		}
	}
	rounds, d := e.timed(600*time.Millisecond, 2100*time.Millisecond)
	t := newTable("FAIR", fmt.Sprintf("fair lock: %d goroutines over %d Clients on one key, hold %v, %v per round", s3Goroutines, s3Goroutines, s3Hold, d), "floor",
		contendedColumns()...)
	err := e.interleave(t, rounds, names, func(_ int, n string) (map[string]float64, error) {
		return e.s3Round(ins[n], "fair:"+n, d)
	})
	if err != nil {
		return err
	}
	t.Notes = append(t.Notes,
		"columns as in S3; al-fair-8clients: WithFair(true), the release hands the key to the queue's head in Redis and wakes it alone",
		"RT/acq, RT/rel: round trips of the Acquire calls (a fair waiter's queue join, made while another goroutine holds the key, and any poll) and of the Release calls (which hand the key over), per section",
		"srv cmds/cs counts the commands inside the scripts too (TIME, ZRANGEBYSCORE, LINDEX, SET, PUBLISH ...)")
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)
	e.check("FAIR", "commands sent per critical section (fair, 8 Clients)", t.med("al-fair-8clients", "cmds"), "<=", 2.5, "")
	e.check("FAIR", "round trips per release, the handoff included (fair, 8 Clients)", t.med("al-fair-8clients", "rt_rel"), "<=", 1, "")
	e.check("FAIR", "handoff gap p50 / PING p50 (fair, 8 Clients)", t.med("al-fair-8clients", "gap_ping"), "<=", 3,
		fmt.Sprintf("gap p50 %.0fµs", t.med("al-fair-8clients", "gap50")))
	e.check("FAIR", "fairness min/max sections per goroutine (fair, 8 Clients)", t.med("al-fair-8clients", "fair"), ">=", 0.9, "")
	e.check("FAIR", "give-ups (fair)", t.med("al-fair-8clients", "giveups"), "<=", 0, "")
	return nil
}
