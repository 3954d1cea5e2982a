package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/bench/internal/stats"
)

// scriptRounds and scriptPipe are -lib scripts' -rounds and -pipe.
var scriptRounds, scriptPipe int

// variant is one pair of acquire and release scripts with their keys and
// arguments, run as S1 runs the library's.
type variant struct {
	name     string
	acq, rel *redis.Script
	acqKeys  []string
	acqArgs  []any
	relKeys  []string
	relArgs  []any
}

// luaDirs are where the library's scripts may be: from bench/, or from
// this command's directory (its tests).
var luaDirs = []string{"../internal/luascripts", "../../../internal/luascripts"}

// lua reads and joins the named script files of the library, as
// luascripts.go joins them.
func lua(names ...string) string {
	dir := luaDirs[0]
	for _, d := range luaDirs {
		if _, err := os.Stat(d); err == nil {
			dir = d
			break
		}
	}
	var b strings.Builder
	for _, n := range names {
		s, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			panic(err)
		}
		b.Write(s)
	}
	return b.String()
}

func variants() []variant {
	acq := redis.NewScript(lua("acquire_fast.lua", "fence.lua", "other_kind.lua", "acquire.lua"))
	rel := redis.NewScript(lua("release.lua"))
	tok36 := "e1ca6c7c-4ebd-4106-8d1c-3f128fb091d0"
	tok22 := "vvedARNTbEU19X4R7lUU4Q"
	minAcq := redis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return -1`)
	minRel := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) redis.call('PUBLISH', KEYS[2], 'released') return 1 end return 0`)
	minRelNoPub := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end return 0`)
	minRelDel2 := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then if redis.call('DEL', KEYS[1], KEYS[3]) > 1 then redis.call('PUBLISH', KEYS[2], 'released') end return 1 end return 0`)
	minRelNumsub := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) if redis.call('PUBSUB', 'NUMSUB', KEYS[2])[2] > 0 then redis.call('PUBLISH', KEYS[2], 'released') end return 1 end return 0`)
	// The fence's keep-alive (fence.lua's keep_fence): a PTTL and, when
	// short, a PEXPIRE; or one PEXPIRE ... GT, a write either way.
	minAcqKeep := redis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then local f = redis.call('INCR', KEYS[2]) if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end return f end return -1`)
	minAcqKeepGT := redis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then local f = redis.call('INCR', KEYS[2]) redis.call('PEXPIRE', KEYS[2], ARGV[2], 'GT') return f end return -1`)
	minAcqNoFence := redis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end return -1`)
	bsmAcq := redis.NewScript(`return redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[3], "NX") and 1 or 0`)
	bsmRel := redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)
	k := []string{"lock:{s1}", "lock:{s1}:fence"}
	kr := []string{"lock:{s1}", "lock:{s1}:notify"}
	return []variant{
		{"agentlock", acq, rel, k, []any{tok36, 10000, "0", "1"}, kr, []any{tok36, "0"}},
		{"agentlock-nofence", acq, rel, k, []any{tok36, 10000, "0", "0"}, kr, []any{tok36, "0"}},
		{"agentlock-tok22", acq, rel, k, []any{tok22, 10000, "0", "1"}, kr, []any{tok22, "0"}},
		{"al-acq+min-rel", acq, minRelDel2, k, []any{tok36, 10000, "0", "1"}, append(kr, "lock:{s1}:w"), []any{tok36}},
		{"min-acq+al-rel", minAcq, rel, k, []any{tok36, 10000}, kr, []any{tok36, "0"}},
		{"minimal", minAcq, minRel, k, []any{tok36, 10000}, kr, []any{tok36}},
		{"minimal-nopub", minAcq, minRelNoPub, k, []any{tok36, 10000}, kr, []any{tok36}},
		{"minimal-del2", minAcq, minRelDel2, k, []any{tok36, 10000}, append(kr, "lock:{s1}:w"), []any{tok36}},
		{"minimal-numsub", minAcq, minRelNumsub, k, []any{tok36, 10000}, kr, []any{tok36}},
		{"minimal-nofence", minAcqNoFence, minRel, k, []any{tok36, 10000}, kr, []any{tok36}},
		{"minimal-keep", minAcqKeep, minRel, k, []any{tok36, 10000}, kr, []any{tok36}},
		{"minimal-keep-gt", minAcqKeepGT, minRel, k, []any{tok36, 10000}, kr, []any{tok36}},
		{"bsm", bsmAcq, bsmRel, []string{"s1"}, []any{tok22, 22, 10000}, []string{"s1"}, []any{tok22}},
	}
}

// runScripts runs n ops of each variant, alternated, rounds times, and
// prints server usec (commandstats) and server CPU per op.
// With pipe > 0 the ops go pipe pairs at a time, the server kept busy, so
// its usec are those of a warm server and vary less between rounds; the
// medians are printed after the rounds.
func runScripts(ctx context.Context, rdb, admin *redis.Client, n, rounds, pipe int) error {
	vs := variants()
	sum := map[string][]float64{}
	cpu := map[string][]float64{}
	for r := range rounds {
		for i := range vs {
			v := vs[(i+r)%len(vs)]
			for range 100 {
				if err := v.once(ctx, rdb); err != nil {
					return fmt.Errorf("%s: %w", v.name, err)
				}
			}
			s0, err := admin.Info(ctx, "commandstats", "cpu").Result()
			if err != nil {
				return err
			}
			if err := v.run(ctx, rdb, n, pipe); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			s1, err := admin.Info(ctx, "commandstats", "cpu").Result()
			if err != nil {
				return err
			}
			a, b := parse(s0), parse(s1)
			sum[v.name] = append(sum[v.name], (b["evalsha"].usec-a["evalsha"].usec)/float64(n))
			cpu[v.name] = append(cpu[v.name], (b["cpu"].usec-a["cpu"].usec)/float64(n))
		}
	}
	for _, v := range vs {
		fmt.Printf("%-18s evalsha usec/op median %6.2f of%v  server cpu µs/op median %6.2f\n",
			v.name, stats.Median(sum[v.name]), fmt1(sum[v.name]), stats.Median(cpu[v.name]))
	}
	return nil
}

func fmt1(xs []float64) string {
	var b strings.Builder
	for _, x := range xs {
		fmt.Fprintf(&b, " %.2f", x)
	}
	return b.String()
}

func (v variant) once(ctx context.Context, rdb *redis.Client) error {
	n, err := v.acq.Run(ctx, rdb, v.acqKeys, v.acqArgs...).Int64()
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("acquire reply %d", n)
	}
	m, err := v.rel.Run(ctx, rdb, v.relKeys, v.relArgs...).Int64()
	if err != nil {
		return err
	}
	if m != 1 {
		return fmt.Errorf("release reply %d", m)
	}
	return nil
}

// run runs n ops of v, one at a time, or pipe at a time in one pipeline.
func (v variant) run(ctx context.Context, rdb *redis.Client, n, pipe int) error {
	if pipe <= 0 {
		for range n {
			if err := v.once(ctx, rdb); err != nil {
				return err
			}
		}
		return nil
	}
	for done := 0; done < n; done += pipe {
		p := rdb.Pipeline()
		var acq, rel []*redis.Cmd
		for range min(pipe, n-done) {
			acq = append(acq, v.acq.EvalSha(ctx, p, v.acqKeys, v.acqArgs...))
			rel = append(rel, v.rel.EvalSha(ctx, p, v.relKeys, v.relArgs...))
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
		for i := range acq {
			if a, _ := acq[i].Int64(); a < 0 {
				return fmt.Errorf("acquire reply %d", a)
			}
			if r, _ := rel[i].Int64(); r != 1 {
				return fmt.Errorf("release reply %d", r)
			}
		}
	}
	return nil
}
