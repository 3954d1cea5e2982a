package srvinfo

import (
	"testing"
	"time"
)

func TestParse_commandstatsAndCPU(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.5\r\nused_cpu_user:0.25\r\nused_cpu_sys_children:9\r\n# Commandstats\r\n" +
		"cmdstat_evalsha:calls=4,usec=20,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setinfo:calls=2,usec=1,usec_per_call=0.50\r\n"
	cmds, cpu := Parse(info)
	if cpu != 1750*time.Millisecond {
		t.Errorf("cpu = %v, want 1.75s (children not counted)", cpu)
	}
	if got, want := cmds["evalsha"], (Stat{Calls: 4, Usec: 20}); got != want {
		t.Errorf("evalsha = %+v, want %+v", got, want)
	}
	if got, want := cmds["client|setinfo"], (Stat{Calls: 2, Usec: 1}); got != want {
		t.Errorf("client|setinfo = %+v, want %+v", got, want)
	}
	if len(cmds) != 2 {
		t.Errorf("parsed %d commands, want 2: %v", len(cmds), cmds)
	}
}
