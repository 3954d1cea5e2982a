// Command s1probe runs bench S1's loop (a new lock per op, TryAcquire +
// Release on one key) for one library alone in its process, against a
// private redis-server, and prints counts per op that do not depend on the
// machine's load: bytes and read/write calls on the client's sockets,
// commands and their server usec (INFO commandstats), heap allocations,
// and, with -trace, goroutines created and woken (by whom). Client and
// server CPU per op are printed too, for what they are worth on a shared
// machine. Run it under `strace -c -f` for syscalls (the server, its
// child, is counted too), or with -pause to attach `strace -c -p`.
//
// -lib scripts compares, on the server alone, the library's acquire and
// release scripts with minimal ones doing the same commands, with variants
// (no fence INCR, no PUBLISH, the fence counter's keep-alive, a shorter
// token) and with bsm/redislock's.
//
//	cd bench && go run ./cmd/s1probe -lib agentlock -n 20000 -trace /tmp/al.trace
//	go run ./cmd/s1probe -lib redislock -n 20000 -idle 8
//	go run ./cmd/s1probe -lib scripts -n 40000
//	go run . -only s1 -quick -trace /tmp/s1.trace && go run ./cmd/s1probe -summarise /tmp/s1.trace -n OPS
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/bench/internal/srvinfo"
	"github.com/agentlock/lock/internal/redistest"
)

// connStats counts what the client's sockets carried.
type connStats struct{ reads, writes, rbytes, wbytes atomic.Int64 }

// countConn is a net.Conn that adds its traffic to a connStats.
type countConn struct {
	net.Conn
	s *connStats
}

func (c countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.s.reads.Add(1)
	c.s.rbytes.Add(int64(n))
	return n, err
}

func (c countConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.s.writes.Add(1)
	c.s.wbytes.Add(int64(n))
	return n, err
}

// cpuProfile is where -cpuprofile writes.
var cpuProfile string

// op is one TryAcquire+Release of a library on key.
type op func(ctx context.Context, key string) error

func main() {
	lib := flag.String("lib", "agentlock", "agentlock, redislock, or scripts (see the command's comment)")
	n := flag.Int("n", 20000, "ops to run")
	idle := flag.Int("idle", 0, "extra idle agentlock Clients kept open (the harness keeps 8)")
	wait := flag.Duration("pause", 0, "sleep this long before the run (to attach strace -p)")
	traceOut := flag.String("trace", "", "write a runtime/trace of the measured ops here and summarise its goroutine events")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the measured ops here")
	flag.IntVar(&scriptRounds, "rounds", 5, "with -lib scripts: rounds of every variant")
	flag.IntVar(&scriptPipe, "pipe", 0, "with -lib scripts: send the ops this many pairs per pipeline (0: one at a time)")
	show := flag.Bool("show", false, "print the commands of one op and stop")
	sumTrace := flag.String("summarise", "", "only summarise this trace (e.g. the bench's -trace), taking -n as its op count")
	flag.Parse()
	if *sumTrace != "" {
		if err := summarise(*sumTrace, *n); err != nil {
			fmt.Fprintln(os.Stderr, "s1probe:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*lib, *n, *idle, *wait, *traceOut, *show); err != nil {
		fmt.Fprintln(os.Stderr, "s1probe:", err)
		os.Exit(1)
	}
}

func run(lib string, n, idle int, pause time.Duration, traceOut string, show bool) error {
	ctx := context.Background()
	srv, err := redistest.StartServer(redistest.Config{})
	if err != nil {
		return err
	}
	defer srv.Stop()
	var cs connStats
	opts := srv.Options()
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countConn{c, &cs}, nil
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	admin := srv.NewClient()
	defer admin.Close()

	for i := range idle {
		idleRdb := srv.NewClient()
		defer idleRdb.Close()
		c := lock.NewClient(idleRdb)
		defer c.Close()
		l := c.NewLock(fmt.Sprintf("idle%d", i))
		if _, err := l.TryAcquire(ctx); err != nil {
			return err
		}
		_ = l.Release(ctx)
	}

	if lib == "scripts" {
		return runScripts(ctx, rdb, admin, n, scriptRounds, scriptPipe)
	}
	var do op
	switch lib {
	case "agentlock":
		c := lock.NewClient(rdb)
		defer c.Close()
		do = func(ctx context.Context, key string) error {
			l := c.NewLock(key)
			ok, err := l.TryAcquire(ctx)
			if err != nil || !ok {
				return fmt.Errorf("acquire: %v %v", ok, err)
			}
			return l.Release(ctx)
		}
	case "redislock":
		c := redislock.New(rdb)
		do = func(ctx context.Context, key string) error {
			l, err := c.Obtain(ctx, key, 10*time.Second, nil)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}
	default:
		return fmt.Errorf("unknown lib %q", lib)
	}
	for range 200 {
		if err := do(ctx, "s1"); err != nil {
			return err
		}
	}
	if show {
		rdb.AddHook(showHook{})
		if err := do(ctx, "s1"); err != nil {
			return err
		}
		return nil
	}
	if pause > 0 {
		fmt.Fprintf(os.Stderr, "server pid %d, client pid %d\n", srv.Pid(), os.Getpid())
		time.Sleep(pause)
	}
	st0, err := admin.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return err
	}
	r0, w0, rb0, wb0 := cs.reads.Load(), cs.writes.Load(), cs.rbytes.Load(), cs.wbytes.Load()
	v0, i0 := ctxt()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	if cpuProfile != "" {
		pf, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pf.Close()
		defer pprof.StopCPUProfile()
	}
	var tf *os.File
	if traceOut != "" {
		if tf, err = os.Create(traceOut); err != nil {
			return err
		}
		if err := trace.Start(tf); err != nil {
			return err
		}
	}
	start := time.Now()
	for range n {
		if err := do(ctx, "s1"); err != nil {
			return err
		}
	}
	el := time.Since(start)
	if tf != nil {
		trace.Stop()
		_ = tf.Close()
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	runtime.ReadMemStats(&m1)
	v1, i1 := ctxt()
	st1, err := admin.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return err
	}
	f := float64(n)
	fmt.Printf("lib=%s n=%d idle=%d  %.1f µs/op wall\n", lib, n, idle, float64(el.Microseconds())/f)
	fmt.Printf("client: cpu %.1f µs/op (user %.1f sys %.1f)  allocs %.1f/op  bytes alloc %.0f/op  GCs %d\n",
		float64(tv(ru1.Utime)+tv(ru1.Stime)-tv(ru0.Utime)-tv(ru0.Stime))/1e3/f,
		float64(tv(ru1.Utime)-tv(ru0.Utime))/1e3/f, float64(tv(ru1.Stime)-tv(ru0.Stime))/1e3/f,
		float64(m1.Mallocs-m0.Mallocs)/f, float64(m1.TotalAlloc-m0.TotalAlloc)/f, m1.NumGC-m0.NumGC)
	fmt.Printf("socket: reads %.2f/op writes %.2f/op  read %.1f B/op written %.1f B/op\n",
		float64(cs.reads.Load()-r0)/f, float64(cs.writes.Load()-w0)/f,
		float64(cs.rbytes.Load()-rb0)/f, float64(cs.wbytes.Load()-wb0)/f)
	fmt.Printf("ctx switches: voluntary %.2f/op involuntary %.2f/op  minflt %.2f/op\n",
		float64(v1-v0)/f, float64(i1-i0)/f, float64(ru1.Minflt-ru0.Minflt)/f)
	a, b := parse(st0), parse(st1)
	fmt.Printf("server: cpu %.1f µs/op\n", (b["cpu"].usec-a["cpu"].usec)/f)
	var names []string
	for k := range b {
		if k != "cpu" && b[k].calls != a[k].calls {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		if k != "info" {
			fmt.Printf("  %-10s %.2f calls/op  %.2f usec/op\n", k, (b[k].calls-a[k].calls)/f, (b[k].usec-a[k].usec)/f)
		}
	}
	if traceOut != "" {
		return summarise(traceOut, n)
	}
	return nil
}

func tv(t syscall.Timeval) int64 { return t.Nano() }

// ctxt reads this process's context switches.
func ctxt() (vol, invol int64) {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		vt, it := ctxtOf("/proc/self/task/" + t.Name() + "/status")
		vol += vt
		invol += it
	}
	return vol, invol
}

// ctxtOf reads one thread's context switches from its status file.
func ctxtOf(path string) (vol, invol int64) {
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		x, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "voluntary_ctxt_switches":
			vol = x
		case "nonvoluntary_ctxt_switches":
			invol = x
		}
	}
	return
}

// stat is one command's calls and usec, as floats for dividing.
type stat struct{ calls, usec float64 }

// parse reads INFO commandstats and cpu; "cpu" is the server's CPU in µs.
func parse(info string) map[string]stat {
	cmds, cpu := srvinfo.Parse(info)
	m := make(map[string]stat, len(cmds)+1)
	for name, c := range cmds {
		m[name] = stat{float64(c.Calls), float64(c.Usec)}
	}
	m["cpu"] = stat{usec: float64(cpu.Microseconds())}
	return m
}

// showHook prints every command sent.
type showHook struct{}

func (showHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (showHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		fmt.Printf("process %q\n", cmd.Args())
		return next(ctx, cmd)
	}
}

func (showHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			fmt.Printf("pipeline %q\n", c.Args())
		}
		return next(ctx, cmds)
	}
}
