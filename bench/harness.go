package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/redistest"
)

// env is what every scenario shares: the servers, the run's settings and
// the results collected so far.
type env struct {
	ctx     context.Context // ends on Ctrl-C
	quick   bool
	rounds  int
	servers []*redistest.Server
	admin   []*redis.Client // one plain client per server, for FLUSHALL and INFO
	res     *results
}

// dur picks the quick or the full value.
func (e *env) dur(quick, full time.Duration) time.Duration {
	if e.quick {
		return quick
	}
	return full
}

// timed picks the rounds and the time per implementation per round of a
// timed scenario. A full run splits fullPer into three shorter rounds, three
// times as many: bursts of load from other processes then hit every
// implementation in turn, and the median of many short per-round ratios
// shrugs them off.
func (e *env) timed(quickPer, fullPer time.Duration) (rounds int, per time.Duration) {
	if e.quick {
		return e.rounds, quickPer
	}
	return 3 * e.rounds, (fullPer / 3).Round(time.Millisecond)
}

// instance is one implementation opened over fresh clients, one per node.
type instance struct {
	name     string
	rdbs     []*redis.Client
	ctrs     []*counter
	newMutex func(key string) mutex
	closeFn  func()
}

// open builds im over new clients for the first nodes servers.
func (e *env) open(im impl, nodes int, s settings) *instance {
	in := &instance{name: im.name}
	for i := range nodes {
		rdb, c := newClient(e.servers[i].Addr())
		in.rdbs = append(in.rdbs, rdb)
		in.ctrs = append(in.ctrs, c)
	}
	in.newMutex, in.closeFn = im.open(in.rdbs, s)
	return in
}

func (in *instance) close() {
	in.closeFn()
	for _, r := range in.rdbs {
		_ = r.Close()
	}
}

// counts returns round trips and commands sent so far over every node.
func (in *instance) counts() (rt, cmds int64) {
	for _, c := range in.ctrs {
		r, n := c.snapshot()
		rt += r
		cmds += n
	}
	return rt, cmds
}

// phaseRT returns the round trips counted toward p so far, over every node.
func (in *instance) phaseRT(p callPhase) (n int64) {
	for _, c := range in.ctrs {
		n += c.phaseRT(p)
	}
	return n
}

// openAll opens every impl on the first nodes servers, and al-before
// beside agentlock when ab.sh built it in (withBefore).
func (e *env) openAll(impls []impl, nodes int, s settings) (map[string]*instance, []string, func()) {
	impls = withBefore(impls, nodes)
	ins := map[string]*instance{}
	var names []string
	for _, im := range impls {
		ins[im.name] = e.open(im, nodes, s)
		names = append(names, im.name)
	}
	return ins, names, func() {
		for _, in := range ins {
			in.close()
		}
	}
}

// flush empties every server, so scenarios do not see each other's keys.
func (e *env) flush() {
	for _, a := range e.admin {
		_ = a.FlushAll(e.ctx).Err()
	}
}

// warm runs a few acquire+release cycles so that connections are dialled
// and scripts loaded before anything is measured.
func warm(ctx context.Context, in *instance, key string, n int) error {
	for range n {
		m := in.newMutex(key)
		ok, err := m.tryAcquire(ctx)
		if err != nil {
			return fmt.Errorf("%s: warm-up acquire: %w", in.name, err)
		}
		if !ok {
			return fmt.Errorf("%s: warm-up acquire: not acquired", in.name)
		}
		if err := m.release(ctx); err != nil {
			return fmt.Errorf("%s: warm-up release: %w", in.name, err)
		}
	}
	return nil
}

// shuffleRounds makes interleave run each round in a seeded random order
// (-shuffle).
var shuffleRounds bool

// interleave runs fn for every implementation in every round, in an order
// rotated by one each round (A B C, B C A, C A B, …), or shuffled with
// -shuffle, records each result and each round's order in t, and then
// computes medians and per-round ratios.
func (e *env) interleave(t *table, rounds int, names []string, fn func(round int, name string) (map[string]float64, error)) error {
	for _, n := range names {
		t.row(n)
	}
	for r := range rounds {
		order := rotate(names, r)
		if shuffleRounds {
			order = shuffled(names, r)
		}
		t.Runs = append(t.Runs, order)
		for _, n := range order {
			if err := e.ctx.Err(); err != nil {
				return err
			}
			m, err := fn(r, n)
			if err != nil {
				return fmt.Errorf("%s round %d %s: %w", t.ID, r+1, n, err)
			}
			t.row(n).Rounds = append(t.row(n).Rounds, numMap(m))
		}
	}
	t.summarize()
	return nil
}

// numMap converts to the JSON-safe number type.
func numMap(m map[string]float64) map[string]num {
	out := make(map[string]num, len(m))
	for k, v := range m {
		out[k] = num(v)
	}
	return out
}

// num is a float64 that encodes NaN and infinities as JSON null.
type num float64

// UnmarshalJSON reads null back as NaN, so that a missing figure prints as
// "-" in -markdown rather than as 0.
func (n *num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = num(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = num(f)
	return nil
}

// MarshalJSON writes null for values JSON cannot hold.
func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return fmt.Appendf(nil, "%.6g", f), nil
}
