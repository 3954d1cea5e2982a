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

// heldReport is a hold worker's first report.
type heldReport struct {
	Fence int64  `json:"fence"`
	Token string `json:"token"`
}

// wroteReport answers a WRITE command: the late write of a holder that may
// have lost its lock without looking.
type wroteReport struct {
	Accepted   bool `json:"accepted"`
	LostBefore bool `json:"lost_before"` // Lost() had closed before the write
}

// lostReport says when and why Lost() closed, counted from the WRITE.
type lostReport struct {
	Fired   bool   `json:"fired"`
	Reason  string `json:"reason"`
	AfterMS int64  `json:"after_ms"` // negative: before the WRITE command arrived
}

// holdWorker acquires FT_KEY with TTL FT_TTL_MS (a read or write hold of
// a read-write lock with FT_RW=read or write, a permit of a semaphore of
// FT_SEM_N when that is set), enters the referee's
// section, reports "held", and then waits for commands on stdin: WRITE makes
// the late write with the hold's fence and reports "wrote", then "lost" once
// Lost() closes (or after 5s).
func holdWorker() error {
	key := os.Getenv("FT_KEY")
	ttl := time.Duration(envInt("FT_TTL_MS", 1000)) * time.Millisecond
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("FT_REDIS")})
	defer rdb.Close()
	c := lock.NewClient(rdb, lock.WithTTL(ttl))
	defer c.Close()
	ref, err := dialReferee(os.Getenv("FT_REFEREE"))
	if err != nil {
		return err
	}
	defer ref.close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, mode := c.NewLock(key), byte(holdExclusive)
	switch os.Getenv("FT_RW") { // a read-write lock's hold instead (rwlock_test.go)
	case "read":
		l, mode = c.NewRWLock(key).ReadLock(), holdRead
	case "write":
		l = c.NewRWLock(key).WriteLock()
	}
	if n := envInt("FT_SEM_N", 0); n > 0 {
		l, mode = c.NewSemaphore(key, n).Permit(), holdPermit // a permit of a semaphore of n
	}
	hist, me := os.Getenv(histEnv), workerClient(os.Getpid())
	call := now()
	if err := l.Acquire(ctx); err != nil {
		return err
	}
	if err := appendHistory(hist, histOp{Op: 'A', Key: key, Client: me, Mode: mode, Fence: l.Fence(), Call: call, Ret: now()}); err != nil {
		return err
	}
	lostAt := make(chan time.Time, 1)
	go func() {
		<-l.Lost()
		lostAt <- time.Now()
	}()
	if _, err := ref.enter(key, l.Fence()); err != nil {
		return err
	}
	report("held", heldReport{Fence: l.Fence(), Token: l.Token()})

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "WRITE" {
			continue
		}
		got := time.Now()
		var lostBefore bool
		select {
		case <-l.Lost():
			lostBefore = true
		default:
		}
		call := now()
		ok, err := ref.write(key, l.Fence())
		if err != nil {
			return err
		}
		if err := appendHistory(hist, histOp{Op: 'W', Key: key, Client: me, Fence: l.Fence(), OK: ok, Call: call, Ret: now()}); err != nil {
			return err
		}
		report("wrote", wroteReport{Accepted: ok, LostBefore: lostBefore})
		lr := lostReport{}
		select {
		case at := <-lostAt:
			lr.Fired, lr.AfterMS = true, at.Sub(got).Milliseconds()
			// The hold ended when Lost() closed; the Release below only
			// tidies up.
			end := histOp{Op: 'R', Key: key, Client: me, Call: at.UnixNano(), Ret: at.UnixNano()}
			if err := appendHistory(hist, end); err != nil {
				return err
			}
			var le *lock.LostError
			if errors.As(l.LostErr(), &le) {
				lr.Reason = le.Reason.String()
			}
		case <-time.After(5 * time.Second):
		}
		report("lost", lr)
		_ = ref.exit(key)
		call = now()
		err = l.Release(context.Background())
		if err != nil && !errors.Is(err, lock.ErrNotHeld) {
			return fmt.Errorf("release: %w", err)
		}
		if !lr.Fired {
			return appendHistory(hist, histOp{Op: 'R', Key: key, Client: me, Call: call, Ret: now()})
		}
		return nil
	}
	return errors.New("stdin closed before WRITE " + strconv.Quote(key))
}
