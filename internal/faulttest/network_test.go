package faulttest

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// interval is one hold as its holder saw it: from Acquire's return to the
// moment the library signalled its loss (the Observer's EventLost, sent as
// Lost() closes) or the holder called Release, on this process's monotonic
// clock.
type interval struct {
	start, end time.Time
	who        string
	fence      int64
	lost       bool
}

// contention runs goroutines of several Clients against one key and
// records every hold and every error class.
type contention struct {
	key     string
	ttl     time.Duration
	mu      sync.Mutex
	holds   []interval
	classes map[string]int
	others  []error              // errors of class "other"
	late    int                  // Acquire returned nil with Lost() already closed
	lostAt  map[string]time.Time // by token: when EventLost was observed
	hist    *history             // every hold, its fenced write and its end
	store   *referee             // the fenced store, called in process
	opts    []lock.Option        // of every lock: WithFair(true) for a fair lock
}

// Observe records when each hold's loss was signalled.
func (c *contention) Observe(e lock.Event) {
	if e.Kind != lock.EventLost {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lostAt == nil {
		c.lostAt = map[string]time.Time{}
	}
	c.lostAt[e.Token] = now
}

func (c *contention) note(call string, err error) {
	cl := errClass(err)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.classes[call+"_"+cl]++
	if cl == "other" && len(c.others) < 5 {
		c.others = append(c.others, err)
	}
}

// run makes goroutines of locks take c.key until ctx ends, holding each
// hold for a random time up to maxHold, or until it is lost. With holding
// not nil, each hold lasts maxHold unless lost, and holding is set while one
// of them holds.
func (c *contention) run(ctx context.Context, wg *sync.WaitGroup, who string, locks *lock.Client, goroutines int,
	maxHold time.Duration, holding *atomic.Bool) {
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(len(who)), uint64(g)))
			client := who + strconv.Itoa(g)
			for ctx.Err() == nil {
				l := locks.NewLock(c.key, c.opts...)
				actx, cancel := context.WithTimeout(ctx, 2*c.ttl)
				call := now()
				err := l.Acquire(actx)
				ret := now()
				cancel()
				if ctx.Err() != nil && err != nil {
					return
				}
				c.note("acquire", err)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				iv := interval{start: time.Now(), who: who, fence: l.Fence()}
				c.hist.add(histOp{Op: 'A', Key: c.key, Client: client, Mode: holdExclusive, Fence: l.Fence(), Call: call, Ret: ret})
				select {
				case <-l.Lost():
					c.mu.Lock()
					c.late++
					c.mu.Unlock()
					iv.lost = true
				default:
					c.write(client, l.Fence())
				}
				entered := !iv.lost
				if holding != nil {
					holding.Store(true)
				}
				d := time.Duration(rng.Int64N(int64(maxHold)))
				if holding != nil {
					d = maxHold
				}
				hold := time.NewTimer(d)
				select {
				case <-l.Lost():
					iv.lost = true
				case <-hold.C:
				}
				hold.Stop()
				iv.end = time.Now()
				if iv.lost {
					c.mu.Lock()
					if at, ok := c.lostAt[l.Token()]; ok && at.Before(iv.end) {
						iv.end = at // the holder's own wake-up delay is not the library's
					}
					c.mu.Unlock()
				}
				if holding != nil {
					holding.Store(false)
				}
				c.mu.Lock()
				c.holds = append(c.holds, iv)
				c.mu.Unlock()
				if entered {
					c.store.apply("X", c.key, 0)
				}
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), c.ttl)
				if iv.lost {
					// The hold ended when its loss was signalled: the
					// library promises nobody else held it before.
					c.hist.add(histOp{Op: 'R', Key: c.key, Client: client, Call: iv.end.UnixNano(), Ret: iv.end.UnixNano()})
					c.note("release", l.Release(rctx))
				} else {
					c.note("release", c.hist.release(rctx, l, client))
				}
				rcancel()
			}
		})
	}
}

// write enters the fenced store's section and offers client's write with
// fence, in the history.
func (c *contention) write(client string, fence int64) {
	c.store.apply("E", c.key, fence)
	call := now()
	ok := c.store.apply("W", c.key, fence) == 1
	c.hist.add(histOp{Op: 'W', Key: c.key, Client: client, Fence: fence, OK: ok, Call: call, Ret: now()})
}

// overlaps returns the pairs of holds that overlap in time, sorted by
// start, and how many holds each side had and lost.
func (c *contention) overlaps() (bad [][2]interval) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hs := slices.Clone(c.holds)
	slices.SortFunc(hs, func(a, b interval) int { return a.start.Compare(b.start) })
	// Fences must rise in the order holds began, and no hold may begin
	// before the one before it ended.
	for i := 1; i < len(hs); i++ {
		for j := i - 1; j >= 0 && j >= i-8; j-- {
			if hs[i].start.Before(hs[j].end) || hs[i].fence <= hs[j].fence {
				bad = append(bad, [2]interval{hs[j], hs[i]})
			}
		}
	}
	return bad
}

func (c *contention) count(who string) (holds, lost int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.holds {
		if h.who == who {
			holds++
			if h.lost {
				lost++
			}
		}
	}
	return holds, lost
}

// TestNetwork_faults puts a toxiproxy proxy between one Client ("faulty")
// and Redis while another Client ("direct") reaches Redis straight, both
// contending for one key, and injects one network fault for a while. The
// holds, as their holders saw them, must never overlap, fences must rise
// in hold order, and every error must be classified.
func TestNetwork_faults(t *testing.T) {
	const ttl = time.Second
	for _, tc := range []netFault{
		{"latencyNearTTL", false, 3 * time.Second,
			func(t *testing.T, p *toxiproxy.Proxy) {
				addToxic(t, p, "lat", "latency", "downstream", `{"latency":800,"jitter":100}`)
			},
			func(t *testing.T, p *toxiproxy.Proxy) { removeToxic(t, p, "lat") }},
		{"latencyOverTTL", true, 3 * time.Second,
			func(t *testing.T, p *toxiproxy.Proxy) {
				addToxic(t, p, "lat", "latency", "downstream", `{"latency":1300}`)
			},
			func(t *testing.T, p *toxiproxy.Proxy) { removeToxic(t, p, "lat") }},
		{"timeout", true, 2 * time.Second,
			func(t *testing.T, p *toxiproxy.Proxy) {
				addToxic(t, p, "to", "timeout", "upstream", `{"timeout":300}`)
			},
			func(t *testing.T, p *toxiproxy.Proxy) { removeToxic(t, p, "to") }},
		{"resetPeer", true, 2 * time.Second,
			func(t *testing.T, p *toxiproxy.Proxy) {
				addToxic(t, p, "rst", "reset_peer", "upstream", `{"timeout":50}`)
			},
			func(t *testing.T, p *toxiproxy.Proxy) { removeToxic(t, p, "rst") }},
		partition(2*ttl + 500*time.Millisecond),
	} {
		t.Run(tc.name, func(t *testing.T) { networkFault(t, "network_"+tc.name, ttl, tc) })
	}
}

// netFault is one network fault of TestNetwork_faults.
type netFault struct {
	name   string
	lose   bool // the faulty holder must lose its hold
	fault  time.Duration
	inject func(t *testing.T, p *toxiproxy.Proxy)
	heal   func(t *testing.T, p *toxiproxy.Proxy)
}

// partition cuts both directions for d, then heals.
func partition(d time.Duration) netFault {
	return netFault{"partitionThenHeal", true, d,
		func(t *testing.T, p *toxiproxy.Proxy) {
			addToxic(t, p, "cut-up", "timeout", "upstream", `{"timeout":0}`)
			addToxic(t, p, "cut-down", "timeout", "downstream", `{"timeout":0}`)
		},
		func(t *testing.T, p *toxiproxy.Proxy) {
			removeToxic(t, p, "cut-up")
			removeToxic(t, p, "cut-down")
		}}
}

// networkFault runs one fault of TestNetwork_faults on locks built with
// opts; scenario names its figure line.
func networkFault(t *testing.T, scenario string, ttl time.Duration, tc netFault, opts ...lock.Option) {
	s := redistest.Start(t, redistest.Config{})
	p := startProxy(t, s.Addr())
	o := s.Options()
	o.Addr = p.Listen // go-redis defaults otherwise: ContextTimeoutEnabled off
	faulty := redis.NewClient(o)
	defer faulty.Close()
	direct := s.Client(t)
	c := &contention{key: "net-" + tc.name, ttl: ttl, classes: map[string]int{},
		hist: newHistory(t), store: startReferee(t), opts: opts}
	cf := lock.NewClient(faulty, lock.WithTTL(ttl), lock.WithObserver(c))
	defer cf.Close()
	cd := lock.NewClient(direct, lock.WithTTL(ttl), lock.WithObserver(c))
	defer cd.Close()

	fctx, fcancel := context.WithCancel(context.Background())
	defer fcancel()
	var wg sync.WaitGroup
	var faultyHolds atomic.Bool
	// The faulty side holds long, renewing, so the fault meets it
	// mid-hold; the direct side waits and takes short holds.
	c.run(fctx, &wg, "faulty", cf, 2, 4*ttl, &faultyHolds)
	waitFor(t, 5*time.Second, faultyHolds.Load)
	dctx, dcancel := context.WithCancel(context.Background())
	defer dcancel()
	c.run(dctx, &wg, "direct", cd, 2, ttl/4, nil)

	time.Sleep(ttl / 2)
	tc.inject(t, p)
	faultAt := time.Now()
	time.Sleep(tc.fault)
	tc.heal(t, p)
	healedAt := time.Now()
	time.Sleep(ttl)
	// After healing, with the direct side gone, the faulty side
	// must get the lock again.
	before, _ := c.count("faulty")
	dcancel()
	again := waitFor(t, 4*ttl, func() bool { n, _ := c.count("faulty"); return n > before || faultyHolds.Load() })
	fcancel()
	wg.Wait()

	bad := c.overlaps()
	nops, took := checkLinearizable(t, c.hist.all(t), 1)
	fh, fl := c.count("faulty")
	dh, dl := c.count("direct")
	figure(t, scenario, "ttl_ms", ttl.Milliseconds(), "fault_ms", healedAt.Sub(faultAt).Milliseconds(),
		"holds_faulty", fh, "lost_faulty", fl, "holds_direct", dh, "lost_direct", dl,
		"overlaps", len(bad), "late_grants", c.late, "errors", fmtCounts(c.classes),
		"stale_accepted", c.store.stats().StaleAccepted, "history_ops", nops, "porcupine_ms", took.Milliseconds())
	for _, b := range bad {
		t.Errorf("overlap: %s fence %d [%v +%v] and %s fence %d [%v +%v]",
			b[0].who, b[0].fence, b[0].start.Format("15:04:05.000"), b[0].end.Sub(b[0].start),
			b[1].who, b[1].fence, b[1].start.Format("15:04:05.000"), b[1].end.Sub(b[1].start))
	}
	for _, err := range c.others {
		t.Errorf("unclassified error: %v", err)
	}
	if c.late > 0 {
		t.Errorf("%d Acquire calls returned nil for a hold already lost", c.late)
	}
	if tc.lose && fl == 0 {
		t.Errorf("the faulty side lost no hold, want its hold lost during the fault")
	}
	if !again {
		t.Errorf("the faulty side did not hold the lock again within %v of the direct side leaving", 4*ttl)
	}
	if dh == 0 {
		t.Errorf("the direct side never held the lock")
	}
}

// waitFor polls cond every 5ms until it holds or d passes; it reports
// whether it held.
func waitFor(t testing.TB, d time.Duration, cond func() bool) bool {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}
