package main

import (
	"io"
	"net"
	"testing"
)

func TestCountConn_countsCallsAndBytes(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var s connStats
	c := countConn{a, &s}
	go func() {
		buf := make([]byte, 5)
		_, _ = io.ReadFull(b, buf)
		_, _ = b.Write([]byte("ok"))
	}()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	if w, wb := s.writes.Load(), s.wbytes.Load(); w != 1 || wb != 5 {
		t.Errorf("writes %d (%d bytes), want 1 (5 bytes)", w, wb)
	}
	if r, rb := s.reads.Load(), s.rbytes.Load(); r < 1 || rb != 2 {
		t.Errorf("reads %d (%d bytes), want at least 1 (2 bytes)", r, rb)
	}
}

func TestParse_commandstatsAndCPU(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.5\r\nused_cpu_user:0.25\r\n# Commandstats\r\n" +
		"cmdstat_evalsha:calls=4,usec=20,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n"
	m := parse(info)
	if got := m["cpu"].usec; got != 1.75e6 {
		t.Errorf("cpu = %v µs, want 1.75e6", got)
	}
	if got := m["evalsha"]; got.calls != 4 || got.usec != 20 {
		t.Errorf("evalsha = %+v, want 4 calls, 20 usec", got)
	}
}
