package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

const (
	capMasters   = 3  // masters of the check's cluster
	capPerMaster = 16 // goroutines per master in the cluster runs
)

// capBcastNoise is the CPU (µs per pair) the other masters may show with no
// message reaching them: below it, the broadcast counts as none.
const capBcastNoise = 0.5

// Rows of the cluster's cost table.
const (
	capCSeq       = "acquire+release one at a time, its master"
	capCPair      = "acquire+release ×64, its master"
	capCBroadcast = "acquire+release, each other master"
	capCRenewal   = "renewal"
)

// capacityCluster starts a cluster of capMasters masters and measures, in
// interleaved rounds: acquire+release pairs on one master's keys only, which
// give a pair's cost on its own master in cluster mode and the cost every
// other master pays for its release (a classic PUBLISH goes to every node of
// a cluster; a sharded SPUBLISH, used on Redis ≥ 7.0, only to its shard); then pairs spread evenly over the masters, whose CPU on each
// master is set against what the costs of the same round predict. Last, the
// renewal of holds spread over the masters. It returns the cost table.
func (e *env) capacityCluster() (*table, error) {
	cl, err := redistest.StartClusterNodes(capMasters, 0)
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	nodes := cl.Nodes()
	admins := make([]*redis.Client, len(nodes))
	ctrs := make([][]*counter, len(nodes))
	byAddr := map[string]*counter{}
	for i, n := range nodes {
		admins[i] = n.NewClient()
		defer admins[i].Close()
		c := &counter{}
		ctrs[i] = []*counter{c}
		byAddr[n.Addr()] = c
	}
	cc := cl.NewClient()
	defer cc.Close()
	cc.OnNewNode(func(rdb *redis.Client) {
		if c := byAddr[rdb.Options().Addr]; c != nil {
			rdb.AddHook(c)
		}
	})
	lc := lock.NewClient(cc)
	defer lc.Close()

	// capConc keys per master, each key's slot on that master.
	keys := make([][]string, len(nodes))
	for i := 0; slices.ContainsFunc(keys, func(ks []string) bool { return len(ks) < capConc }); i++ {
		k := "capc:" + strconv.Itoa(i)
		s, err := cl.MasterForKey(e.ctx, "{"+k+"}")
		if err != nil {
			return nil, err
		}
		m := slices.Index(nodes, s)
		if m < 0 {
			return nil, fmt.Errorf("key %s: master %s is not a node of the cluster", k, s.Addr())
		}
		if len(keys[m]) < capConc {
			keys[m] = append(keys[m], k)
		}
	}
	for _, ks := range keys {
		if err := warmClient(e.ctx, lc, ks[0]); err != nil {
			return nil, err
		}
	}
	sz := e.capSizes()
	ms, err := newMeters(e.ctx, admins, ctrs, sz.idle)
	if err != nil {
		return nil, err
	}
	d := 2 * sz.pairDur
	rounds := 3
	if e.quick {
		rounds = 1
	}

	costs := newTable("CAP-cluster-cost", fmt.Sprintf("server cost on a %d-master cluster, %d goroutines per loaded master, %v per run", len(nodes), capPerMaster, d), "", capColumns()...)
	check := newTable("CAP-cluster", fmt.Sprintf("model check: pairs spread over %d masters (%d goroutines each) against the costs of the same round", len(nodes), capPerMaster), "",
		column{Key: "pairs", Header: "pairs/s", Prec: 0},
		column{Key: "rt", Header: "RT/pair", Prec: 3},
		column{Key: "util", Header: "core used", Prec: 3},
		column{Key: "pred", Header: "predicted", Prec: 3},
		column{Key: "ratio", Header: "used/pred", Prec: 2},
		column{Key: "cap", Header: "pairs/s at 1 core", Prec: 0},
		column{Key: "cap_pred", Header: "predicted", Prec: 0},
	)
	// on1 runs pairs on n keys of master 1 only.
	on1 := func(n int) ([]phase, error) {
		return measureAll(ms, func() ([]int, error) {
			only := make([][]string, len(nodes))
			only[0] = keys[0][:n]
			return pairLoop(e.ctx, lc, only, d)
		})
	}
	spreadKeys := make([][]string, len(nodes))
	for i, ks := range keys {
		spreadKeys[i] = ks[:capPerMaster]
	}
	for range rounds {
		seq, err := on1(1)
		if err != nil {
			return nil, err
		}
		costs.row(capCSeq).Rounds = append(costs.row(capCSeq).Rounds, numMap(seq[0].metrics()))
		one, err := on1(capConc)
		if err != nil {
			return nil, err
		}
		pm := one[0].metrics()
		costs.row(capCPair).Rounds = append(costs.row(capCPair).Rounds, numMap(pm))
		var bc []float64
		for _, p := range one[1:] {
			bc = append(bc, us(p.d.cpu-p.idle)/float64(max(one[0].ops, 1)))
		}
		bcast := median(bc)
		costs.row(capCBroadcast).Rounds = append(costs.row(capCBroadcast).Rounds, numMap(map[string]float64{"cpu": bcast}))
		perRT, perCmd := ioFit(seq[0].metrics(), pm)

		spread, err := measureAll(ms, func() ([]int, error) { return pairLoop(e.ctx, lc, spreadKeys, d) })
		if err != nil {
			return nil, err
		}
		total := 0
		for _, p := range spread {
			total += p.ops
		}
		all := map[string]float64{}
		var maxPred float64
		for i, p := range spread {
			m := clusterCheckRow(p, total-p.ops, pm["cmd"], perRT, perCmd, bcast)
			name := fmt.Sprintf("master %d", i+1)
			check.row(name).Rounds = append(check.row(name).Rounds, numMap(m))
			all["pairs"] += m["pairs"]
			all["rt"] += m["rt"] / float64(len(spread))
			all["util"] = max(all["util"], m["util"])
			maxPred = max(maxPred, m["pred"])
		}
		// The cluster is full when its busiest master is.
		all["pred"], all["ratio"] = maxPred, all["util"]/maxPred
		all["cap"], all["cap_pred"] = all["pairs"]/all["util"], all["pairs"]/maxPred
		check.row("cluster").Rounds = append(check.row("cluster").Rounds, numMap(all))
	}

	ren, err := renewalPhase(e.ctx, lc, ms, func(i int) string { return "capc:r:" + strconv.Itoa(i) }, sz)
	if err != nil {
		return nil, fmt.Errorf("renewal: %w", err)
	}
	costs.row(capCRenewal).Rounds = append(costs.row(capCRenewal).Rounds, numMap(mergePhases(ren).metrics()))

	costs.summarize()
	check.summarize()
	costs.Notes = append(costs.Notes,
		"its master: every pair on the keys of master 1 (columns as in CAP), from one goroutine or 64; each other master: the CPU masters 2 and 3 spent per pair of the ×64 run, with no command of their own — the release's PUBLISH reaching them over the cluster bus",
		fmt.Sprintf("renewal: %d holds spread over the masters, three ticks, all masters together", sz.renewN))
	check.Notes = append(check.Notes,
		"predicted core used = (pairs × cmd µs/pair + round trips × µs/RT + commands × µs/cmd + pairs on the other masters × broadcast µs) / wall, every cost from the one-master runs of the same round (µs/RT and µs/cmd: CPU beyond command time, split over round trips and commands by least squares)",
		"pairs/s at 1 core = pairs/s / core used, measured or predicted; the cluster row: all pairs/s over the busiest master's core used, since the cluster is full when that master is",
		"the client and the three servers share this machine's two cores, so no run drives a master to a full core itself: throughput at one core is extrapolated from the core used, which is what the check tests")
	costs.print(os.Stdout)
	check.print(os.Stdout)
	e.res.Tables = append(e.res.Tables, costs, check)
	ratio := check.med("cluster", "ratio")
	e.check("CAP", "cluster: busiest master's CPU, measured / predicted", ratio, ">=", 0.8, fmt.Sprintf("%.3f vs %.3f of a core", check.med("cluster", "util"), check.med("cluster", "pred")))
	e.check("CAP", "cluster: busiest master's CPU, measured / predicted", ratio, "<=", 1.2, fmt.Sprintf("pairs/s at one core %.0f, predicted %.0f", check.med("cluster", "cap"), check.med("cluster", "cap_pred")))
	return costs, nil
}

// clusterCheckRow sets one master's share of a spread run, with elsewhere
// pairs done on the other masters meanwhile, against the prediction from
// costs measured on one master: cmd µs of command time per pair, perRT µs
// per round trip and perCmd µs per command sent, and bcast µs per release
// on another master.
func clusterCheckRow(p phase, elsewhere int, cmd, perRT, perCmd, bcast float64) map[string]float64 {
	wall := p.wall.Seconds()
	pairs := float64(p.ops)
	util := (p.d.cpu - p.idle).Seconds() / wall
	io := float64(p.rt)*perRT + float64(sumCounts(p.sent))*perCmd
	pred := (pairs*cmd + io + float64(elsewhere)*bcast) / 1e6 / wall
	return map[string]float64{
		"pairs": pairs / wall, "rt": float64(p.rt) / max(pairs, 1), "util": util, "pred": pred, "ratio": util / pred,
		"cap": pairs / wall / util, "cap_pred": pairs / wall / pred,
	}
}

// ioFit splits the server's CPU beyond command time, over phases' metrics
// (per operation: cpu, cmd, round trips rt, commands sent), into a cost
// per round trip and a cost per command, by least squares.
func ioFit(phases ...map[string]float64) (perRT, perCmd float64) {
	var xx, xy, yy, xz, yz float64
	for _, m := range phases {
		x, y, z := m["rt"], m["sent"], m["cpu"]-m["cmd"]
		xx, xy, yy, xz, yz = xx+x*x, xy+x*y, yy+y*y, xz+x*z, yz+y*z
	}
	det := xx*yy - xy*xy
	if det == 0 {
		return math.NaN(), math.NaN()
	}
	return (xz*yy - yz*xy) / det, (yz*xx - xz*xy) / det
}

// mergePhases adds up phases measured over the same stretch on several
// servers: operations, commands, round trips, server time and CPU.
func mergePhases(ps []phase) phase {
	out := phase{sent: map[string]int64{}, d: srvStats{cmds: map[string]cmdStat{}}}
	for _, p := range ps {
		out.ops += p.ops
		out.rt += p.rt
		out.idle += p.idle
		out.wall = max(out.wall, p.wall)
		out.d.cpu += p.d.cpu
		for k, v := range p.sent {
			out.sent[k] += v
		}
		for k, v := range p.d.cmds {
			c := out.d.cmds[k]
			out.d.cmds[k] = cmdStat{calls: c.calls + v.calls, usec: c.usec + v.usec}
		}
	}
	return out
}

// heldPerShard is how many holds one shard keeps renewed at one full core,
// renewing each every ttl/3 at renew µs.
func heldPerShard(ttl time.Duration, renew float64) float64 {
	return ttl.Seconds() * 1e6 / (3 * renew)
}

// pairsPerSec is acquire+release pairs per second for masters shards at one
// full core each, load spread evenly, when a pair costs pair µs on its own
// master and bcast µs on every other one.
func pairsPerSec(masters int, pair, bcast float64) float64 {
	return float64(masters) * 1e6 / (pair + float64(masters-1)*bcast)
}

// capModel derives, from the single-server costs t and the cluster costs
// c, what one shard and clusters of shards sustain at one full core per
// shard: pairs/s when every operation is its own round trip and when
// coalesced as in the ×64 runs, and holds kept renewed at three TTLs.
func capModel(t, c *table) *table {
	type costs struct{ seq, co, renew, bcast float64 }
	standalone := costs{
		seq:   t.med(capAcquire, "cpu") + t.med(capRelease, "cpu"),
		co:    t.med(capPair64, "cpu"),
		renew: t.med(capRenewal, "cpu"),
	}
	cluster := costs{
		seq: c.med(capCSeq, "cpu"), co: c.med(capCPair, "cpu"),
		renew: c.med(capCRenewal, "cpu"), bcast: c.med(capCBroadcast, "cpu"),
	}
	m := newTable("CAP-model", "what one shard and a cluster sustain at one full core of redis-server per shard (derived from CAP and CAP-cluster-cost)", "",
		column{Key: "rt1", Header: "pairs/s, 1 RT per op", Prec: 0},
		column{Key: "co", Header: "pairs/s, coalesced", Prec: 0},
		column{Key: "held10", Header: "held @TTL 10s", Prec: 0},
		column{Key: "held30", Header: "held @TTL 30s", Prec: 0},
		column{Key: "held60", Header: "held @TTL 60s", Prec: 0},
	)
	add := func(name string, masters int, k costs) {
		n := float64(masters)
		m.row(name).Rounds = append(m.row(name).Rounds, numMap(map[string]float64{
			"rt1":    pairsPerSec(masters, k.seq, k.bcast),
			"co":     pairsPerSec(masters, k.co, k.bcast),
			"held10": n * heldPerShard(10*time.Second, k.renew),
			"held30": n * heldPerShard(30*time.Second, k.renew),
			"held60": n * heldPerShard(60*time.Second, k.renew),
		}))
	}
	add("standalone", 1, standalone)
	cluster.bcast = max(cluster.bcast, 0) // noise can make it a hair below zero
	noBcast := cluster
	noBcast.bcast = 0
	for _, n := range []int{3, 6, 12} {
		add(fmt.Sprintf("cluster, %d masters", n), n, cluster)
		add(fmt.Sprintf("cluster, %d masters, no broadcast", n), n, noBcast)
	}
	m.summarize()
	bcastNote := fmt.Sprintf("cluster: masters × 10⁶ / (pair + (masters − 1) × %.2f µs): each release's message costs every other master that much (classic PUBLISH crosses the cluster bus), which caps a cluster at 10⁶ / %.2f = %.0f pairs/s however many masters; \"no broadcast\": the same without it", cluster.bcast, cluster.bcast, 1e6/cluster.bcast)
	if cluster.bcast < capBcastNoise {
		bcastNote = fmt.Sprintf("cluster: masters × 10⁶ / pair: the other masters spent %.2f µs per pair, within noise of nothing — the release's wake-up went out by sharded pub/sub (SPUBLISH, Redis ≥ 7.0), which stays on its own shard; so the \"no broadcast\" rows match and no broadcast caps the cluster", cluster.bcast)
	}
	sRT, sCmd := ioFit(t.Rows[capAcquire].Median.floats(), t.Rows[capRelease].Median.floats(), t.Rows[capTTL].Median.floats(),
		t.Rows[capAcquire64].Median.floats(), t.Rows[capRelease64].Median.floats(), t.Rows[capPair64].Median.floats(), t.Rows[capRenewal].Median.floats())
	m.Notes = append(m.Notes,
		fmt.Sprintf("a pair's CPU on its master, measured: standalone %.1f µs one op per round trip, %.1f µs coalesced (%.3f RT per pair); cluster mode %.1f and %.1f µs (%.3f RT per pair)", standalone.seq, standalone.co, t.med(capPair64, "rt"), cluster.seq, cluster.co, c.med(capCPair, "rt")),
		fmt.Sprintf("standalone, CPU ≈ command time + %.1f µs per round trip + %.2f µs per command (least squares over the CAP rows but handoff and wake-up): the round trip, not the script, is most of an uncoalesced operation's cost", sRT, sCmd),
		bcastNote,
		fmt.Sprintf("held = masters × TTL × 10⁶ / (3 × renewal µs): each hold renewed every TTL/3 in pipelines of up to 500, at %.2f µs (standalone) or %.2f µs (cluster) of CPU per renewal", standalone.renew, cluster.renew),
		"every figure is one full core of redis-server per shard, spent on nothing else; size for a fraction of it (docs/benchmarks.md, Capacity model)")
	return m
}
