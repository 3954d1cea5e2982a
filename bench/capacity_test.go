package main

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const infoSample = "# Commandstats\r\n" +
	"cmdstat_evalsha:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_set:calls=10,usec=4,usec_per_call=0.40,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_client|setinfo:calls=2,usec=3,usec_per_call=1.50,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_info:calls=1,usec=30,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
	"\r\n# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.750000\r\nused_cpu_sys_children:9.000000\r\n"

func TestParseStats(t *testing.T) {
	s := parseStats(infoSample, time.Time{})
	if got, want := s.cmds["evalsha"], (cmdStat{calls: 10, usec: 50}); got != want {
		t.Errorf("evalsha = %+v, want %+v", got, want)
	}
	if got := s.cmds["client|setinfo"].calls; got != 2 {
		t.Errorf("client|setinfo calls = %d, want 2", got)
	}
	if got, want := s.cpu, 2*time.Second; got != want {
		t.Errorf("cpu = %v, want %v (sys + user, children left out)", got, want)
	}
	if got := s.calls(); got != 22 {
		t.Errorf("calls() = %d, want 22 (INFO left out)", got)
	}
}

func TestSrvStatsSince(t *testing.T) {
	a := srvStats{cmds: map[string]cmdStat{"evalsha": {10, 50}, "get": {3, 1}}, cpu: time.Second}
	b := srvStats{cmds: map[string]cmdStat{"evalsha": {14, 70}, "get": {3, 1}, "del": {1, 2}}, cpu: 3 * time.Second}
	d := b.since(a)
	if got, want := d.cmds["evalsha"], (cmdStat{4, 20}); got != want {
		t.Errorf("evalsha delta = %+v, want %+v", got, want)
	}
	if _, ok := d.cmds["get"]; ok {
		t.Error("get did not change but is in the delta")
	}
	if got, want := d.cmds["del"], (cmdStat{1, 2}); got != want {
		t.Errorf("del delta = %+v, want %+v", got, want)
	}
	if d.cpu != 2*time.Second {
		t.Errorf("cpu delta = %v, want 2s", d.cpu)
	}
}

func TestCommandTime_countsOnlyWhatTheClientSent(t *testing.T) {
	// A script's 5µs include the SET inside it: counting the SET as well
	// would count it twice.
	d := srvStats{cmds: map[string]cmdStat{"evalsha": {10, 50}, "set": {10, 4}}}
	if got, want := commandTime(d, map[string]int64{"evalsha": 10}), 50*time.Microsecond; got != want {
		t.Errorf("commandTime = %v, want %v", got, want)
	}
	// A name sent but never counted by the server adds nothing.
	if got := commandTime(d, map[string]int64{"hget": 3}); got != 0 {
		t.Errorf("commandTime of an unknown name = %v, want 0", got)
	}
}

func TestOpSent_leavesOutHandshakes(t *testing.T) {
	got := opSent(map[string]int64{"evalsha": 5, "hello": 1, "client": 1, "ping": 2})
	if len(got) != 1 || got["evalsha"] != 5 {
		t.Errorf("opSent = %v, want only evalsha: 5", got)
	}
}

func TestCounter_byName_transactionCountsMultiAndExec(t *testing.T) {
	c := &counter{}
	c.logNames.Store(true)
	ctx := context.Background()
	c.count([]redis.Cmder{redis.NewStatusCmd(ctx, "multi"), redis.NewStringCmd(ctx, "set", "k", "v"),
		redis.NewIntCmd(ctx, "incr", "f"), redis.NewSliceCmd(ctx, "exec")})
	c.count([]redis.Cmder{redis.NewIntCmd(ctx, "incr", "f")})
	got := c.sentByName()
	if got["multi"] != 1 || got["exec"] != 1 || got["set"] != 0 || got["incr"] != 1 {
		t.Errorf("sentByName = %v, want multi 1, exec 1, incr 1 (the one outside the transaction)", got)
	}
}

func TestIOFit(t *testing.T) {
	// cpu − cmd = 8·rt + 0.5·sent, exactly.
	rows := []map[string]float64{
		{"rt": 1, "sent": 1, "cmd": 3, "cpu": 11.5},
		{"rt": 0.1, "sent": 2, "cmd": 5, "cpu": 6.8},
		{"rt": 0.002, "sent": 1, "cmd": 3, "cpu": 3.516},
	}
	perRT, perCmd := ioFit(rows...)
	if math.Abs(perRT-8) > 1e-9 || math.Abs(perCmd-0.5) > 1e-9 {
		t.Errorf("ioFit = %v, %v; want 8, 0.5", perRT, perCmd)
	}
	if a, _ := ioFit(rows[0]); !math.IsNaN(a) {
		t.Errorf("ioFit of one row = %v, want NaN (two unknowns)", a)
	}
}

func TestCapacityFormulas(t *testing.T) {
	if got := pairsPerSec(1, 10, 5); got != 100_000 {
		t.Errorf("pairsPerSec(1 master) = %v, want 100000 (no other master to broadcast to)", got)
	}
	// 3 masters, 10µs a pair, 5µs on each other master: 3e6 / 20.
	if got := pairsPerSec(3, 10, 5); got != 150_000 {
		t.Errorf("pairsPerSec(3 masters) = %v, want 150000", got)
	}
	// 30s TTL, renewal every 10s at 4µs: 10s·1e6/4µs holds.
	if got := heldPerShard(30*time.Second, 4); got != 2_500_000 {
		t.Errorf("heldPerShard = %v, want 2500000", got)
	}
	w := wakeUp(map[string]float64{"sent": 2, "cmd": 10, "cpu": 40},
		map[string]float64{"sent": 1, "cmd": 2, "cpu": 10},
		map[string]float64{"sent": 1, "cmd": 3, "cpu": 12})
	if w["sent"] != 1 || w["cmd"] != 5 || w["cpu"] != 18 {
		t.Errorf("wakeUp = %v, want one attempt, cmd 5, cpu 18", w)
	}
}

func TestMergePhases(t *testing.T) {
	a := phase{ops: 3, rt: 2, wall: time.Second, sent: map[string]int64{"evalsha": 3},
		d: srvStats{cmds: map[string]cmdStat{"evalsha": {3, 9}}, cpu: time.Millisecond}, idle: time.Microsecond}
	b := phase{ops: 1, rt: 1, wall: 2 * time.Second, sent: map[string]int64{"evalsha": 1},
		d: srvStats{cmds: map[string]cmdStat{"evalsha": {1, 5}}, cpu: time.Millisecond}, idle: time.Microsecond}
	m := mergePhases([]phase{a, b})
	if m.ops != 4 || m.rt != 3 || m.wall != 2*time.Second || m.sent["evalsha"] != 4 ||
		m.d.cmds["evalsha"] != (cmdStat{4, 14}) || m.d.cpu != 2*time.Millisecond || m.idle != 2*time.Microsecond {
		t.Errorf("mergePhases = %+v", m)
	}
}
