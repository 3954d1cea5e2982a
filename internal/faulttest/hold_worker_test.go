package faulttest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
)

// dialWorker connects a worker process as its FT_ variables say: a lock
// Client on FT_REDIS with TTL FT_TTL_MS (1s if unset), and a connection to
// the referee at FT_REFEREE. done closes both.
func dialWorker() (c *lock.Client, ref *refClient, done func(), err error) {
	ttl := time.Duration(envInt("FT_TTL_MS", 1000)) * time.Millisecond
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("FT_REDIS")})
	if ref, err = dialReferee(os.Getenv("FT_REFEREE")); err != nil {
		rdb.Close()
		return nil, nil, nil, err
	}
	c = lock.NewClient(rdb, lock.WithTTL(ttl))
	return c, ref, func() {
		ref.close()
		c.Close()
		rdb.Close()
	}, nil
}

// heldReport is a hold worker's first report.
type heldReport struct {
	Fence  int64            `json:"fence"` // the first member's
	Fences map[string]int64 `json:"fences"`
	Token  string           `json:"token"`
}

// wroteReport answers a WRITE command: the late write of a holder that may
// have lost its lock without looking.
type wroteReport struct {
	Accepted   bool `json:"accepted"`    // by the store of any member
	LostBefore bool `json:"lost_before"` // Lost() had closed before the write
}

// lostReport says when and why Lost() closed, counted from the WRITE.
type lostReport struct {
	Fired   bool   `json:"fired"`
	Reason  string `json:"reason"`
	AfterMS int64  `json:"after_ms"` // negative: before the WRITE command arrived
}

// holdWorker takes the hold its FT_ variables name (workerHold: a mutex of
// FT_KEY by default) with TTL FT_TTL_MS, enters the referee's section of
// each member, reports "held", and then waits for commands on stdin: WRITE
// makes the late write to each member with the hold's fence there and
// reports "wrote", then "lost" once Lost() closes (or after 5s).
func holdWorker() error {
	c, ref, done, err := dialWorker()
	if err != nil {
		return err
	}
	defer done()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, mode := workerHold(c, os.Getenv)
	hist, me := os.Getenv(histEnv), workerClient(os.Getpid())
	call := now()
	if err := l.Acquire(ctx); err != nil {
		return err
	}
	if err := appendHistory(hist, acquireOps(l, me, mode, call, now())...); err != nil {
		return err
	}
	lostAt := make(chan time.Time, 1)
	go func() {
		<-l.Lost()
		lostAt <- time.Now()
	}()
	if err := enterAll(ref, l); err != nil {
		return err
	}
	ms := members(l)
	hr := heldReport{Fence: ms[0].fence, Fences: map[string]int64{}, Token: l.Token()}
	for _, m := range ms {
		hr.Fences[m.key] = m.fence
	}
	report("held", hr)

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "WRITE" {
			continue
		}
		got := time.Now()
		var wr wroteReport
		select {
		case <-l.Lost():
			wr.LostBefore = true
		default:
		}
		for _, m := range ms {
			call := now()
			ok, err := ref.write(m.key, m.fence)
			if err != nil {
				return err
			}
			if err := appendHistory(hist, histOp{Op: 'W', Key: m.key, Client: me, Fence: m.fence, OK: ok, Call: call, Ret: now()}); err != nil {
				return err
			}
			wr.Accepted = wr.Accepted || ok
		}
		report("wrote", wr)
		lr := lostReport{}
		select {
		case at := <-lostAt:
			lr.Fired, lr.AfterMS = true, at.Sub(got).Milliseconds()
			// The hold ended when Lost() closed; the Release below only
			// tidies up.
			if err := appendHistory(hist, endOps(l, me, at.UnixNano(), at.UnixNano())...); err != nil {
				return err
			}
			var le *lock.LostError
			if errors.As(l.LostErr(), &le) {
				lr.Reason = le.Reason.String()
			}
		case <-time.After(5 * time.Second):
		}
		report("lost", lr)
		for _, m := range ms {
			_ = ref.exit(m.key)
		}
		call = now()
		err = l.Release(context.Background())
		// After a loss the release only tidies up; through a connection
		// the fault closed it may fail on the network, which is no error.
		if err != nil && !errors.Is(err, lock.ErrNotHeld) && !(lr.Fired && isNetwork(err)) {
			return fmt.Errorf("release: %w", err)
		}
		if !lr.Fired {
			return appendHistory(hist, endOps(l, me, call, now())...)
		}
		return nil
	}
	return errors.New("stdin closed before WRITE " + strconv.Quote(os.Getenv("FT_KEY")+os.Getenv("FT_MULTI")))
}

// lateWrite tells a hold worker to make its late write and returns its
// "wrote" and "lost" reports.
func (w *worker) lateWrite() (wroteReport, lostReport) {
	w.t.Helper()
	if err := w.send("WRITE"); err != nil {
		w.t.Fatalf("send WRITE: %v", err)
	}
	var wrote wroteReport
	w.expect("wrote", &wrote, 10*time.Second)
	var lost lostReport
	w.expect("lost", &lost, 10*time.Second)
	return wrote, lost
}
