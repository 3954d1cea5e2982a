package kindtest

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

func TestClosedAddr_refusesAndKeepsThePort(t *testing.T) {
	addr := ClosedAddr(t)
	_, err := net.DialTimeout("tcp", addr, time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
		t.Fatalf("Listen(%s) succeeded: the port is not reserved", addr)
	}
}
