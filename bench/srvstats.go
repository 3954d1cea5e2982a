package main

import (
	"context"
	"maps"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/bench/internal/srvinfo"
)

// cmdStat is one command's line of INFO commandstats: how often the server
// ran it and the time it spent in it. A script's (or EXEC's) time includes
// the commands it called, which are counted under their own names too.
type cmdStat struct {
	calls int64
	usec  int64
}

// srvStats is one reading of a server's INFO commandstats and INFO cpu.
type srvStats struct {
	cmds map[string]cmdStat // by name as the server spells it: "evalsha", "client|setinfo"
	cpu  time.Duration      // used_cpu_sys + used_cpu_user: every thread of the process
	at   time.Time
}

// readStats reads the server's command statistics and CPU time in one call
// (sections: "commandstats", "cpu", or both when none are given).
func readStats(ctx context.Context, rdb *redis.Client, sections ...string) (srvStats, error) {
	if len(sections) == 0 {
		sections = []string{"commandstats", "cpu"}
	}
	s, err := rdb.Info(ctx, sections...).Result()
	if err != nil {
		return srvStats{}, err
	}
	return parseStats(s, time.Now()), nil
}

// parseStats parses the text of INFO commandstats and INFO cpu.
func parseStats(info string, at time.Time) srvStats {
	cmds, cpu := srvinfo.Parse(info)
	st := srvStats{cmds: make(map[string]cmdStat, len(cmds)), cpu: cpu, at: at}
	for name, c := range cmds {
		st.cmds[name] = cmdStat{calls: c.Calls, usec: c.Usec}
	}
	return st
}

// since returns what happened between an earlier reading and s.
func (s srvStats) since(earlier srvStats) srvStats {
	d := srvStats{cmds: map[string]cmdStat{}, cpu: s.cpu - earlier.cpu, at: s.at}
	for name, c := range s.cmds {
		e := earlier.cmds[name]
		if c.calls != e.calls {
			d.cmds[name] = cmdStat{calls: c.calls - e.calls, usec: c.usec - e.usec}
		}
	}
	return d
}

// harnessCommand reports whether the server counts name for the harness's
// own INFO and CONFIG calls rather than for the clients under test.
func harnessCommand(name string) bool {
	return name == "info" || name == "config" || strings.HasPrefix(name, "config|")
}

// handshake reports whether a client sends name to set up a connection (go-redis
// sends HELLO and CLIENT SETINFO on every new one), not for a lock operation.
func handshake(name string) bool {
	switch name {
	case "hello", "client", "auth", "select", "ping", "readonly":
		return true
	}
	return false
}

// calls returns the calls of every command in s except the harness's own,
// inner calls of scripts included.
func (s srvStats) calls() int64 {
	var n int64
	for name, c := range s.cmds {
		if !harnessCommand(name) {
			n += c.calls
		}
	}
	return n
}

// opSent drops the connection handshake from commands counted by name.
func opSent(sent map[string]int64) map[string]int64 {
	out := maps.Clone(sent)
	maps.DeleteFunc(out, func(name string, _ int64) bool { return handshake(name) })
	return out
}

// commandTime is the server's time in the commands a client sent, over a
// delta d: for each command name the client sent, that many calls at the
// name's mean time per call in d. A script's or EXEC's time covers the calls
// inside it, which the client did not send, so nothing is counted twice.
// (Were the same name also called inside scripts in d, its mean covers both
// kinds of call; lock operations do not mix them within one phase.)
func commandTime(d srvStats, sent map[string]int64) time.Duration {
	var usec float64
	for name, n := range sent {
		c := d.cmds[name]
		if c.calls > 0 {
			usec += float64(n) * float64(c.usec) / float64(c.calls)
		}
	}
	return time.Duration(usec * float64(time.Microsecond))
}

// sumCounts adds up a by-name count.
func sumCounts(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// subCounts returns a - b by name, leaving out names whose count did not change.
func subCounts(a, b map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// commandCalls sums the calls of INFO commandstats, leaving out the INFO
// and CONFIG calls the harness itself made.
func commandCalls(ctx context.Context, rdb *redis.Client) (int64, error) {
	s, err := readStats(ctx, rdb, "commandstats")
	if err != nil {
		return 0, err
	}
	return s.calls(), nil
}

// serverCPU returns the server's user+system CPU time so far (INFO cpu).
func serverCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	s, err := readStats(ctx, rdb, "cpu")
	if err != nil {
		return 0, err
	}
	return s.cpu, nil
}
