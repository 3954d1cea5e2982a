// Scheduler: three processes campaign to run one periodic job; one leads
// and runs it, the others watch. The demo kills the leader with kill -9,
// and another process takes over once the dead leader's term runs out.
//
// Run it with `go run ./examples/scheduler` (an in-process Redis is
// started, and the program starts itself three times as the nodes), or
// against your own server with `REDIS_ADDR=localhost:6379 go run ./examples/scheduler`.
// It exits 1 if no other node takes over within the TTL and a second.
//
// Each node runs Election.Lead: fn runs the job every tick while the node
// leads, its ctx ends if the term is lost, and the node resigns when fn
// returns (on SIGINT or SIGTERM). Each node also follows Election.Observe
// and logs every change it sees, "no leader" included. The term passed to
// the job is a fencing token: a store that keeps the highest term it saw
// refuses a deposed leader's late writes.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

const (
	election = "example:scheduler"
	ttl      = 2 * time.Second // a crashed leader is replaced within about this
	tick     = 300 * time.Millisecond
)

func main() {
	var err error
	if len(os.Args) == 3 && os.Args[1] == "node" {
		err = node(os.Args[2])
	} else {
		err = demo()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		os.Exit(1)
	}
}

// node is one scheduler process: it campaigns, runs the job while it
// leads, and logs what it observes, until SIGINT or SIGTERM.
func node(name string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	locks := lock.NewClient(rdb, lock.WithTTL(ttl))
	defer locks.Close()
	e := locks.NewElection(election)
	go func() {
		for l := range e.Observe(ctx) {
			if l.Term == 0 {
				fmt.Printf("%s sees: no leader\n", name)
			} else {
				fmt.Printf("%s sees: leader %s, term %d\n", name, l.Value, l.Term)
			}
		}
	}()
	value := fmt.Sprintf("%s pid=%d", name, os.Getpid())
	for ctx.Err() == nil {
		err := e.Lead(ctx, value, func(ctx context.Context) error {
			t := time.NewTicker(tick)
			defer t.Stop()
			for {
				fmt.Printf("%s runs the job (term %d)\n", name, e.Term())
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
			}
		})
		if err != nil && ctx.Err() == nil {
			fmt.Printf("%s: %v; campaigning again\n", name, err)
		}
	}
	return nil
}

// demo starts three nodes, kills the leader with SIGKILL and checks that
// another takes over.
func demo() error {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		m, err := miniredis.Run()
		if err != nil {
			return err
		}
		defer m.Close()
		addr = m.Addr()
		go expire(m) // miniredis counts TTLs down only when told
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	nodes := map[int]*exec.Cmd{}
	defer func() {
		for _, cmd := range nodes {
			_ = cmd.Process.Signal(syscall.SIGTERM) // they resign and exit
			_ = cmd.Wait()
		}
	}()
	for i := 1; i <= 3; i++ {
		cmd := exec.Command(self, "node", "node-"+strconv.Itoa(i))
		cmd.Env = append(os.Environ(), "REDIS_ADDR="+addr)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		nodes[cmd.Process.Pid] = cmd
	}
	return killLeader(addr, nodes)
}

// killLeader waits for a leader, kills its process with SIGKILL, and waits
// for the next leader.
func killLeader(addr string, nodes map[int]*exec.Cmd) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	views := locks.NewElection(election).Observe(ctx)
	first, err := nextLeader(views, 0)
	if err != nil {
		return err
	}
	pid, _ := strconv.Atoi(first.Value[strings.LastIndex(first.Value, "=")+1:])
	cmd := nodes[pid]
	if cmd == nil {
		return fmt.Errorf("leader %q is none of our nodes", first.Value)
	}
	time.Sleep(2 * tick) // let the leader run its job in the log
	fmt.Printf("demo: kill -9 %d (%s)\n", pid, first.Value)
	killed := time.Now()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	delete(nodes, pid)
	next, err := nextLeader(views, first.Term)
	if err != nil {
		return err
	}
	took := time.Since(killed)
	fmt.Printf("demo: %s took over %v after the kill (TTL %v), term %d > %d\n",
		next.Value, took.Round(10*time.Millisecond), ttl, next.Term, first.Term)
	if took > ttl+time.Second {
		return fmt.Errorf("takeover took %v, want within the TTL %v and a second", took, ttl)
	}
	time.Sleep(2 * tick) // let the new leader run its job in the log
	return nil
}

// nextLeader returns the first leader views shows in a term after term.
func nextLeader(views <-chan lock.Leadership, term int64) (lock.Leadership, error) {
	for l := range views {
		if l.Term > term {
			return l, nil
		}
	}
	return lock.Leadership{}, errors.New("no leader in time")
}

// expire makes the in-process Redis count its TTLs down with the clock.
func expire(m *miniredis.Miniredis) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for range t.C {
		m.FastForward(50 * time.Millisecond)
	}
}
