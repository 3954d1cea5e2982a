package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// The capacity scenario measures what each lock operation costs one
// redis-server — the time INFO commandstats charges to the commands the
// library sends, and the server's whole CPU (INFO cpu), which also pays for
// reading requests and writing replies — and derives from those costs what
// one shard, and a cluster of shards, sustains. capacityCluster then checks
// the derivation on a 3-master cluster.

const (
	capConc       = 64          // goroutines of a concurrent phase, as in S2
	capParkBudget = time.Minute // how long waiters may take to park
)

// capSizes are the sizes of one capacity run.
type capSizes struct {
	ops      int           // operations per sequential phase
	renewN   int           // holds the renewal phase keeps renewed
	renewTTL time.Duration // their TTL: renewal every TTL/3
	pairDur  time.Duration // the acquire+release loop of 64 goroutines
	idle     time.Duration // how long the server's CPU at rest is read
}

func (e *env) capSizes() capSizes {
	if e.quick {
		return capSizes{ops: 1000, renewN: 5000, renewTTL: 1500 * time.Millisecond, pairDur: 500 * time.Millisecond, idle: 300 * time.Millisecond}
	}
	return capSizes{ops: 4000, renewN: 20000, renewTTL: 3 * time.Second, pairDur: time.Second, idle: time.Second}
}

// phase is what one measured stretch of operations cost one server.
type phase struct {
	ops  int
	wall time.Duration
	sent map[string]int64 // commands the clients under test sent, by name, handshakes left out
	rt   int64            // round trips they made (a pipeline counts once)
	d    srvStats         // the server's statistics over the phase
	idle time.Duration    // the server's CPU at rest over wall, left out of cpu
}

// metrics returns the phase's figures per operation: commands sent, round
// trips, calls the server counted (inside scripts included), command time
// and CPU in µs, the CPU beyond command time per round trip, and the share
// of a core the server used (at rest left out).
func (p phase) metrics() map[string]float64 {
	ops := float64(max(p.ops, 1))
	m := map[string]float64{
		"ops":   float64(p.ops),
		"sent":  float64(sumCounts(p.sent)) / ops,
		"rt":    float64(p.rt) / ops,
		"calls": float64(p.d.calls()) / ops,
		"cmd":   us(commandTime(p.d, p.sent)) / ops,
		"cpu":   us(p.d.cpu-p.idle) / ops,
		"util":  float64(p.d.cpu-p.idle) / float64(max(p.wall, 1)),
	}
	if m["rt"] >= 0.02 {
		// Below that, pipelines of hundreds of commands: the difference is
		// within the noise of either reading, divided by almost nothing.
		m["io"] = (m["cpu"] - m["cmd"]) / m["rt"]
	}
	var pub cmdStat
	for _, name := range []string{"publish", "spublish"} {
		c := p.d.cmds[name]
		pub.calls += c.calls
		pub.usec += c.usec
	}
	if pub.calls > 0 {
		m["pub"] = float64(pub.usec) / float64(pub.calls)
	}
	return m
}

// meter reads one server's statistics around a phase, and counts the
// commands the clients under test send meanwhile.
type meter struct {
	ctx   context.Context
	admin *redis.Client
	ctrs  []*counter
	idle  float64 // the server's CPU seconds per second at rest
}

// newMeter reads the server's CPU at rest for d.
func newMeter(ctx context.Context, admin *redis.Client, d time.Duration, ctrs ...*counter) (*meter, error) {
	ms, err := newMeters(ctx, []*redis.Client{admin}, [][]*counter{ctrs}, d)
	if err != nil {
		return nil, err
	}
	return ms[0], nil
}

// newMeters makes a meter for each server, ctrs[i] counting what is sent to
// admins[i]'s server, and reads their CPU at rest for d, all at once.
func newMeters(ctx context.Context, admins []*redis.Client, ctrs [][]*counter, d time.Duration) ([]*meter, error) {
	ms := make([]*meter, len(admins))
	s0 := make([]srvStats, len(admins))
	for i, a := range admins {
		ms[i] = &meter{ctx: ctx, admin: a, ctrs: ctrs[i]}
		for _, c := range ctrs[i] {
			c.logNames.Store(true)
		}
		var err error
		if s0[i], err = readStats(ctx, a, "cpu"); err != nil {
			return nil, err
		}
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for i, a := range admins {
		s1, err := readStats(ctx, a, "cpu")
		if err != nil {
			return nil, err
		}
		ms[i].idle = float64(s1.cpu-s0[i].cpu) / float64(s1.at.Sub(s0[i].at))
	}
	return ms, nil
}

// counts returns the round trips and commands counted so far.
func (m *meter) counts() (rt, cmds int64) {
	for _, c := range m.ctrs {
		r, n := c.snapshot()
		rt += r
		cmds += n
	}
	return rt, cmds
}

func (m *meter) sent() map[string]int64 {
	all := map[string]int64{}
	for _, c := range m.ctrs {
		for k, v := range c.sentByName() {
			all[k] += v
		}
	}
	return all
}

// measure runs fn, which does the phase's operations and returns how many,
// between two readings of the server.
func (m *meter) measure(fn func() (int, error)) (phase, error) {
	ps, err := measureAll([]*meter{m}, func() ([]int, error) {
		n, err := fn()
		return []int{n}, err
	})
	if err != nil {
		return phase{}, err
	}
	return ps[0], nil
}

// measureAll runs fn between two readings of every meter's server; fn
// returns the operations each server did.
func measureAll(ms []*meter, fn func() ([]int, error)) ([]phase, error) {
	s0 := make([]srvStats, len(ms))
	n0 := make([]map[string]int64, len(ms))
	rt0 := make([]int64, len(ms))
	for i, m := range ms {
		var err error
		if s0[i], err = readStats(m.ctx, m.admin); err != nil {
			return nil, err
		}
		n0[i] = m.sent()
		rt0[i], _ = m.counts()
	}
	ops, err := fn()
	if err != nil {
		return nil, err
	}
	ps := make([]phase, len(ms))
	for i, m := range ms {
		s1, err := readStats(m.ctx, m.admin)
		if err != nil {
			return nil, err
		}
		wall := s1.at.Sub(s0[i].at)
		rt1, _ := m.counts()
		ps[i] = phase{ops: ops[i], wall: wall, sent: opSent(subCounts(m.sent(), n0[i])), rt: rt1 - rt0[i],
			d: s1.since(s0[i]), idle: time.Duration(m.idle * float64(wall))}
	}
	return ps, nil
}

// each runs fn(i) for every i in [0, n) on g goroutines and returns the
// first error.
func each(g, n int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		mu    sync.Mutex
		first error
	)
	for range min(g, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// Rows of the per-operation table.
const (
	capAcquire   = "acquire"
	capAcquire64 = "acquire ×64"
	capTTL       = "TTL"
	capRelease   = "release"
	capRelease64 = "release ×64"
	capPair64    = "acquire+release ×64"
	capRenewal   = "renewal"
	capHandoff   = "handoff"
	capWakePhase = "release→waiter elsewhere"
	capWakeUp    = "wake-up (derived)"
)

// capColumns are the columns of a per-operation table.
func capColumns() []column {
	return []column{
		{Key: "ops", Header: "ops", Prec: 0},
		{Key: "sent", Header: "cmds sent/op", Prec: 2},
		{Key: "rt", Header: "RT/op", Prec: 3},
		{Key: "calls", Header: "srv calls/op", Prec: 2},
		{Key: "cmd", Header: "cmd µs/op", Prec: 2},
		{Key: "cpu", Header: "CPU µs/op", Prec: 2},
		{Key: "io", Header: "I/O µs/RT", Prec: 1},
		{Key: "util", Header: "core used", Prec: 2},
		{Key: "pub", Header: "PUBLISH µs", Prec: 2},
	}
}

// capacity measures every operation's cost on one server over several
// rounds, then on a 3-master cluster, checks that the costs add up there,
// and derives the model.
func (e *env) capacity() error {
	sz := e.capSizes()
	rounds := e.rounds
	if e.quick {
		rounds = min(rounds, 3)
	}
	t := newTable("CAP", fmt.Sprintf("server cost of each operation on one redis-server (%d ops per phase; renewal: %d holds, TTL %v)", sz.ops, sz.renewN, sz.renewTTL), "", capColumns()...)
	for _, name := range []string{capAcquire, capAcquire64, capTTL, capRelease, capRelease64, capPair64, capRenewal, capHandoff, capWakePhase, capWakeUp} {
		t.row(name)
	}
	for r := range rounds {
		if err := e.ctx.Err(); err != nil {
			return err
		}
		ms, err := e.capRound(r, sz)
		if err != nil {
			return fmt.Errorf("round %d: %w", r+1, err)
		}
		for name, m := range ms {
			t.row(name).Rounds = append(t.row(name).Rounds, numMap(m))
		}
		e.flush()
	}
	t.summarize()
	t.Notes = append(t.Notes,
		"cmd = server time in the commands the library sent (INFO commandstats usec; a script's time includes the calls inside it); CPU = redis-server user+system CPU (INFO cpu) less its CPU at rest, which also pays for reading requests and writing replies; I/O = (CPU − cmd) per round trip (left out where pipelines of hundreds make it noise)",
		"commandstats times a command by the clock, so a server preempted mid-command (several servers and the client on two cores) shows more command time than CPU; the model uses CPU",
		"one at a time: one goroutine, each operation its own round trip (the most I/O per operation); ×64: 64 goroutines, which the library coalesces into pipelines; renewal: one extend inside the renewal loop's pipelines of up to 500, three ticks",
		"handoff: a release that hands the lock to a waiter in the same Client; release→waiter elsewhere: a release whose PUBLISH wakes a waiter in another Client, which then acquires; wake-up (derived) = that phase less a release and the waiter's acquire attempts (its cmds sent/op column: those attempts)",
		"PUBLISH µs = INFO commandstats time per PUBLISH call inside the release script (no subscriber in the release phases, one in release→waiter elsewhere)")
	t.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, t)

	ct, err := e.capacityCluster()
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	model := capModel(t, ct)
	model.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, model)
	return nil
}

// capRound measures every operation once, each phase on fresh keys.
func (e *env) capRound(r int, sz capSizes) (map[string]map[string]float64, error) {
	addr := e.servers[0].Addr()
	rdb, ctr := newClient(addr)
	defer rdb.Close()
	rdb2, ctr2 := newClient(addr)
	defer rdb2.Close()
	c := lock.NewClient(rdb)
	defer c.Close()
	c2 := lock.NewClient(rdb2)
	defer c2.Close()
	m, err := newMeter(e.ctx, e.admin[0], sz.idle, ctr, ctr2)
	if err != nil {
		return nil, err
	}
	if err := warmClient(e.ctx, c, fmt.Sprintf("cap:%d:warm", r)); err != nil {
		return nil, err
	}
	if err := warmClient(e.ctx, c2, fmt.Sprintf("cap:%d:warm2", r)); err != nil {
		return nil, err
	}
	out := map[string]map[string]float64{}
	key := func(ph string, i int) string { return "cap:" + strconv.Itoa(r) + ":" + ph + ":" + strconv.Itoa(i) }

	// Acquire, TTL and release, one at a time and from 64 goroutines.
	for _, g := range []int{1, capConc} {
		locks := make([]*lock.Lock, sz.ops)
		acq, err := m.measure(func() (int, error) {
			return sz.ops, each(g, sz.ops, func(i int) error {
				locks[i] = c.NewLock(key("a"+strconv.Itoa(g), i))
				return tryAcquire(e.ctx, locks[i])
			})
		})
		if err != nil {
			return nil, fmt.Errorf("acquire: %w", err)
		}
		if g == 1 {
			ttl, err := m.measure(func() (int, error) {
				return sz.ops, each(1, sz.ops, func(i int) error {
					_, err := locks[i].TTL(e.ctx)
					return err
				})
			})
			if err != nil {
				return nil, fmt.Errorf("TTL: %w", err)
			}
			out[capTTL] = ttl.metrics()
		}
		rel, err := m.measure(func() (int, error) {
			return sz.ops, each(g, sz.ops, func(i int) error { return locks[i].Release(e.ctx) })
		})
		if err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		if g == 1 {
			out[capAcquire], out[capRelease] = acq.metrics(), rel.metrics()
		} else {
			out[capAcquire64], out[capRelease64] = acq.metrics(), rel.metrics()
		}
	}

	// Acquire+release pairs from 64 goroutines, each on its own key, for a
	// while: the load that comes closest to saturating the server here.
	keys := make([]string, capConc)
	for i := range keys {
		keys[i] = key("p", i)
	}
	pair, err := m.measure(func() (int, error) {
		n, err := pairLoop(e.ctx, c, [][]string{keys}, sz.pairDur)
		return n[0], err
	})
	if err != nil {
		return nil, fmt.Errorf("pairs: %w", err)
	}
	out[capPair64] = pair.metrics()

	// A release handing the lock to a waiter of the same Client; a first
	// small round loads the handoff script.
	if _, err := e.capWaiters(m, c, c, 2, func(i int) string { return key("hw", i) }); err != nil {
		return nil, fmt.Errorf("handoff: %w", err)
	}
	hand, err := e.capWaiters(m, c, c, sz.ops, func(i int) string { return key("h", i) })
	if err != nil {
		return nil, fmt.Errorf("handoff: %w", err)
	}
	out[capHandoff] = hand.metrics()

	// A release waking a waiter in another Client, which then acquires.
	wake, err := e.capWaiters(m, c, c2, sz.ops, func(i int) string { return key("w", i) })
	if err != nil {
		return nil, fmt.Errorf("wake-up: %w", err)
	}
	out[capWakePhase] = wake.metrics()
	out[capWakeUp] = wakeUp(out[capWakePhase], out[capRelease], out[capAcquire])

	ren, err := renewalPhase(e.ctx, c, []*meter{m}, func(i int) string { return key("r", i) }, sz)
	if err != nil {
		return nil, fmt.Errorf("renewal: %w", err)
	}
	out[capRenewal] = ren[0].metrics()
	return out, nil
}

// wakeUp is the part of a release→waiter phase that neither the release nor
// the waiter's acquire attempts explain: delivering the message.
func wakeUp(ph, rel, acq map[string]float64) map[string]float64 {
	attempts := (ph["sent"] - rel["sent"]) / acq["sent"]
	return map[string]float64{
		"sent": attempts,
		"cmd":  ph["cmd"] - rel["cmd"] - attempts*acq["cmd"],
		"cpu":  ph["cpu"] - rel["cpu"] - attempts*acq["cpu"],
	}
}

// warmClient acquires, reads the TTL of, extends and releases key once, so
// that connections are dialled and every script is loaded before anything
// is measured.
func warmClient(ctx context.Context, c *lock.Client, key string) error {
	l := c.NewLock(key)
	if err := tryAcquire(ctx, l); err != nil {
		return err
	}
	if _, err := l.TTL(ctx); err != nil {
		return err
	}
	if err := l.Extend(ctx, lock.DefaultTTL); err != nil {
		return err
	}
	return l.Release(ctx)
}

// tryAcquire makes one attempt that must succeed.
func tryAcquire(ctx context.Context, l *lock.Lock) error {
	ok, err := l.TryAcquire(ctx)
	if err == nil && !ok {
		err = fmt.Errorf("%s: not acquired", l.Key())
	}
	return err
}

// pairLoop runs acquire+release pairs for d on one goroutine per key, keys
// grouped (by master on a cluster), and returns the pairs done per group.
func pairLoop(ctx context.Context, c *lock.Client, keys [][]string, d time.Duration) ([]int, error) {
	type job struct {
		group int
		key   string
	}
	var jobs []job
	for g, ks := range keys {
		for _, k := range ks {
			jobs = append(jobs, job{g, k})
		}
	}
	counts := make([]atomic.Int64, len(keys))
	end := time.Now().Add(d)
	err := each(len(jobs), len(jobs), func(i int) error {
		j := jobs[i]
		for time.Now().Before(end) {
			l := c.NewLock(j.key)
			if err := tryAcquire(ctx, l); err != nil {
				return err
			}
			if err := l.Release(ctx); err != nil {
				return err
			}
			counts[j.group].Add(1)
		}
		return nil
	})
	out := make([]int, len(keys))
	for i := range counts {
		out[i] = int(counts[i].Load())
	}
	return out, err
}

// capWaiters holds n keys in holder, parks one waiter per key in waiters
// (the same Client: releases hand over; another: releases wake by pub/sub),
// and measures the releases, one at a time: each release, then its waiter
// holding the key. Waiters back off for a minute, so they do not poll
// during the phase.
func (e *env) capWaiters(m *meter, holder, waiters *lock.Client, n int, key func(int) string) (phase, error) {
	held := make([]*lock.Lock, n)
	if err := each(capConc, n, func(i int) error {
		held[i] = holder.NewLock(key(i))
		return tryAcquire(e.ctx, held[i])
	}); err != nil {
		return phase{}, err
	}
	ctx, cancel := context.WithTimeout(e.ctx, capParkBudget)
	defer cancel()
	got := make([]*lock.Lock, n)
	done := make([]chan error, n)
	sent0 := sumCounts(opSent(m.sent()))
	var wg sync.WaitGroup
	for i := range n {
		done[i] = make(chan error, 1)
		wg.Go(func() {
			l := waiters.NewLock(key(i), lock.WithBackoff(time.Minute, time.Minute))
			err := l.Acquire(ctx)
			if err == nil {
				got[i] = l
			}
			done[i] <- err
		})
	}
	defer func() {
		cancel()
		wg.Wait()
		for _, l := range got {
			if l != nil {
				_ = l.Release(e.ctx)
			}
		}
	}()
	// Parked: every waiter made its first attempt, and nothing has been
	// sent or subscribed for a while.
	if err := waitParked(ctx, e.admin[0], m, sent0+int64(n)); err != nil {
		return phase{}, err
	}
	return m.measure(func() (int, error) {
		for i := range n {
			if err := held[i].Release(e.ctx); err != nil {
				return 0, err
			}
			if err := <-done[i]; err != nil {
				return 0, fmt.Errorf("waiter: %w", err)
			}
		}
		return n, nil
	})
}

// waitParked waits until the clients under test have sent at least want
// commands and then nothing more, and the server's subscriptions stopped
// changing, for 100ms.
func waitParked(ctx context.Context, admin *redis.Client, m *meter, want int64) error {
	const quiet = 100 * time.Millisecond
	var lastSent, lastSubs int64 = -1, -1
	stable := time.Now()
	for {
		sent := sumCounts(opSent(m.sent()))
		subs, err := subscriptions(ctx, admin)
		if err != nil {
			return err
		}
		if sent != lastSent || subs != lastSubs {
			lastSent, lastSubs, stable = sent, subs, time.Now()
		} else if sent >= want && time.Since(stable) >= quiet {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiters did not park: %d of %d commands sent, %d subscriptions: %w", sent, want, subs, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// subscriptions counts the server's channels, shard channels and patterns
// with a subscriber.
func subscriptions(ctx context.Context, admin *redis.Client) (int64, error) {
	chans, err := admin.PubSubChannels(ctx, "*").Result()
	if err != nil {
		return 0, err
	}
	shard, err := admin.PubSubShardChannels(ctx, "*").Result()
	if err != nil {
		return 0, err
	}
	pats, err := admin.PubSubNumPat(ctx).Result()
	if err != nil {
		return 0, err
	}
	return int64(len(chans)+len(shard)) + pats, nil
}

// renewalPhase holds sz.renewN locks of c (TTL sz.renewTTL) and measures
// three renewal ticks on every meter's server, reading the servers in the
// quiet between ticks. Each phase's ops are the commands sent to its server.
func renewalPhase(ctx context.Context, c *lock.Client, ms []*meter, key func(int) string, sz capSizes) ([]phase, error) {
	locks := make([]*lock.Lock, sz.renewN)
	if err := each(capConc, sz.renewN, func(i int) error {
		locks[i] = c.NewLock(key(i), lock.WithTTL(sz.renewTTL))
		return tryAcquire(ctx, locks[i])
	}); err != nil {
		return nil, err
	}
	defer func() {
		_ = each(capConc, len(locks), func(i int) error {
			_ = locks[i].Release(ctx)
			return nil
		})
	}()
	sent := func() int64 {
		var n int64
		for _, m := range ms {
			_, cmds := m.counts()
			n += cmds
		}
		return n
	}
	quiet := sz.renewTTL / 20
	if err := waitQuiet(ctx, sent, quiet, false); err != nil {
		return nil, err
	}
	ps, err := measureAll(ms, func() ([]int, error) {
		n0 := make([]int64, len(ms))
		for i, m := range ms {
			_, n0[i] = m.counts()
		}
		for range 3 {
			if err := waitQuiet(ctx, sent, quiet, true); err != nil {
				return nil, err
			}
		}
		ops := make([]int, len(ms))
		for i, m := range ms {
			_, n := m.counts()
			ops[i] = int(n - n0[i])
		}
		return ops, nil
	})
	if err != nil {
		return nil, err
	}
	for _, l := range locks {
		select {
		case <-l.Lost():
			return nil, fmt.Errorf("%s lost during the renewal phase: %w", l.Key(), l.LostErr())
		default:
		}
	}
	return ps, nil
}

// waitQuiet waits until count has not moved for quiet; with burst, it first
// waits for count to move (a renewal tick to begin).
func waitQuiet(ctx context.Context, count func() int64, quiet time.Duration, burst bool) error {
	last := count()
	if burst {
		for {
			if n := count(); n != last {
				last = n
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	stable := time.Now()
	for time.Since(stable) < quiet {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(quiet / 10):
		}
		if n := count(); n != last {
			last, stable = n, time.Now()
		}
	}
	return nil
}
