// Command bench compares agentlock with go-redsync, bsm/redislock and the
// two-round-trip floor on redis-server processes it starts on loopback.
//
//	cd bench && go run . -quick        # about 2 minutes
//	cd bench && go run .               # the full run docs/benchmarks.md quotes
//	cd bench && go run . -only s1,s3   # some scenarios
//	cd bench && go run . -only capacity  # server cost per operation, the capacity model
//	cd bench && go run . -only once      # Client.Once under a stampede
//	cd bench && go run . -markdown results/latest.json  # tables for docs/benchmarks.md
//
// Every scenario runs the implementations in interleaved rounds (A B C,
// B C A, …) and reports medians and the median of per-round ratios to a
// baseline from the same run. Results go to results/latest.json.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/redistest"
)

// scenario is one of S1..S7 or the capacity model.
type scenario struct {
	id    string
	nodes int // servers it needs
	run   func(*env) error
}

var scenarios = []scenario{
	{"s1", 1, (*env).s1},
	{"s1pair", 1, (*env).s1pair},
	{"s2", 1, (*env).s2},
	{"s3", 1, (*env).s3},
	{"s4", 1, (*env).s4},
	{"s5", 5, (*env).s5},
	{"s6", 1, (*env).s6},
	{"s7", 1, (*env).s7},
	{"capacity", 1, (*env).capacity},
	{"once", 1, (*env).once},
	{"rw", 1, (*env).rw},
	{"sem", 1, (*env).sem},
	{"fair", 1, (*env).fair},
	{"force", 1, (*env).force},
	{"elect", 1, (*env).elect},
}

func main() {
	quick := flag.Bool("quick", false, "short rounds and S7 at 10 000 locks only (about 2 minutes)")
	rounds := flag.Int("rounds", 5, "interleaved rounds per scenario")
	only := flag.String("only", "", "comma-separated scenarios to run, e.g. s1,s3 (default all)")
	out := flag.String("out", "results/latest.json", "where to write the machine-readable results")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	traceOut := flag.String("trace", "", "write a runtime/trace of the whole run to this file (go tool trace)")
	flag.BoolVar(&shuffleRounds, "shuffle", false, "run each round's implementations in a seeded random order rather than a rotated one")
	markdown := flag.String("markdown", "", "print this results file as Markdown tables and exit (runs nothing)")
	flag.Parse()
	if *markdown != "" {
		if err := writeMarkdown(os.Stdout, *markdown); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if *traceOut != "" {
		f, err := os.Create(*traceOut)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer trace.Stop()
	}
	if err := run(*quick, *rounds, *only, *out); err != nil {
		pprof.StopCPUProfile()
		trace.Stop()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(quick bool, rounds int, only, out string) error {
	if rounds < 1 {
		return fmt.Errorf("-rounds %d: need at least 1", rounds)
	}
	want := map[string]bool{}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(strings.ToLower(s)); s != "" {
			want[s] = true
		}
	}
	var todo []scenario
	nodes := 0
	for _, s := range scenarios {
		if len(want) == 0 || want[s.id] {
			todo = append(todo, s)
			nodes = max(nodes, s.nodes)
		}
	}
	if len(todo) == 0 {
		ids := make([]string, len(scenarios))
		for i, s := range scenarios {
			ids[i] = s.id
		}
		return fmt.Errorf("-only %q: no such scenario (%s)", only, strings.Join(ids, ", "))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &env{ctx: ctx, quick: quick, rounds: rounds, res: &results{
		Date: time.Now().UTC().Format(time.RFC3339), Command: "go run . " + strings.Join(os.Args[1:], " "),
		Quick: quick, Rounds: rounds,
	}}
	stopServers := e.startServers(nodes)
	defer stopServers()
	if err := e.ctx.Err(); err != nil {
		return err
	}
	if len(e.servers) < nodes {
		return fmt.Errorf("started %d of %d redis-server processes", len(e.servers), nodes)
	}
	go func() { // a second Ctrl-C, or a stuck scenario, must not strand servers
		<-ctx.Done()
		time.Sleep(5 * time.Second)
		stopServers()
		os.Exit(130)
	}()
	e.res.Machine = e.describe()
	m := e.res.Machine
	fmt.Printf("bench: %d CPUs (%s), %s, redis %s, %d rounds, quick=%v\n", m.CPUs, m.CPU, m.Go, m.Redis, rounds, quick)

	start := time.Now()
	var err error
	for _, s := range todo {
		t0 := time.Now()
		if err = s.run(e); err != nil {
			err = fmt.Errorf("%s: %w", s.id, err)
			break
		}
		e.flush()
		fmt.Printf("  (%s took %v)\n", s.id, time.Since(t0).Round(100*time.Millisecond))
	}
	e.res.Duration = time.Since(start).Round(time.Second).String()
	printTargets(os.Stdout, e.res.Targets)
	if beforeImpl != nil {
		fmt.Println()
		printAB(os.Stdout, e.res.Tables)
	}
	if werr := e.res.write(out); werr != nil && err == nil {
		err = werr
	}
	fmt.Printf("\nresults: %s (%s)\n", out, e.res.Duration)
	return err
}

// startServers starts n redis-server processes and returns a function that
// stops them (idempotent).
func (e *env) startServers(n int) func() {
	var once sync.Once
	stop := func() {
		once.Do(func() {
			for _, a := range e.admin {
				_ = a.Close()
			}
			for _, s := range e.servers {
				s.Stop()
			}
		})
	}
	for range n {
		s, err := redistest.StartServer(redistest.Config{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: start redis-server:", err)
			return stop
		}
		e.servers = append(e.servers, s)
		e.admin = append(e.admin, s.NewClient())
	}
	return stop
}

func (e *env) describe() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if len(e.admin) > 0 {
		m.Redis = redisVersion(e.ctx, e.admin[0])
	}
	return m
}

func redisVersion(ctx context.Context, rdb *redis.Client) string {
	s, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(l, "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}
