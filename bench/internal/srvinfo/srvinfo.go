// Package srvinfo reads the text of a redis-server's INFO commandstats and
// INFO cpu, for the bench harness and its probes.
package srvinfo

import (
	"strconv"
	"strings"
	"time"
)

// Stat is one command's line of INFO commandstats: how often the server
// ran it and the time it spent in it, in microseconds.
type Stat struct {
	Calls int64 // times run
	Usec  int64 // µs spent in it; a script's includes the commands it called
}

// Parse returns the command statistics in info, by name as the server
// spells it ("evalsha", "client|setinfo"), and the CPU time of the whole
// process (used_cpu_sys + used_cpu_user).
func Parse(info string) (cmds map[string]Stat, cpu time.Duration) {
	cmds = map[string]Stat{}
	var secs float64
	for l := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok {
			continue
		}
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			secs += f
			continue
		}
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		var s Stat
		for kv := range strings.SplitSeq(v, ",") {
			f, val, _ := strings.Cut(kv, "=")
			switch f {
			case "calls":
				s.Calls, _ = strconv.ParseInt(val, 10, 64)
			case "usec":
				s.Usec, _ = strconv.ParseInt(val, 10, 64)
			}
		}
		cmds[name] = s
	}
	return cmds, time.Duration(secs * float64(time.Second))
}
