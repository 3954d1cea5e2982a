package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestWaiters_plainMutex: a plain mutex with an Acquire waiting in another
// Client shows that waiter (its Client listening on P{K}:notify) in list
// and inspect.
func TestWaiters_plainMutex(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	ctx := context.Background()
	holder := newLocks(t, rdb, lock.WithTTL(time.Minute))
	waiter := newLocks(t, s.Client(t), lock.WithTTL(time.Minute))
	held := holder.NewLock("job:w")
	holdAll(t, held)

	wl := waiter.NewLock("job:w")
	done := make(chan error, 1)
	go func() { done <- wl.Acquire(ctx) }()
	// The waiter is waiting once its Client listens on the notify channel.
	for {
		n, err := rdb.PubSubNumSub(ctx, "lock:{job:w}:notify").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n["lock:{job:w}:notify"] == 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Acquire returned %v while the lock was held", err)
		default:
		}
	}
	r := ctl(t, s.Addr(), "--json", "inspect", "job:w")
	if r.code != 0 || !strings.Contains(r.stdout, `"waiters":1`) {
		t.Errorf("inspect: exit %d, %q, want waiters 1", r.code, r.stdout)
	}
	r = ctl(t, s.Addr(), "--json", "list", "job:*")
	if r.code != 0 || !strings.Contains(r.stdout, `"waiters":1`) {
		t.Errorf("list: exit %d, %q, want waiters 1", r.code, r.stdout)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiting Acquire: %v", err)
	}
	if err := wl.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWrongAddress: nothing listens at the address: one line on stderr,
// lockctl's own, none of go-redis's pool log, and exit 2.
func TestWrongAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a free port: connections are refused
	r := ctl(t, addr, "list")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != exitUsage || len(lines) != 1 || !strings.Contains(lines[0], "connect "+addr) {
		t.Errorf("exit %d, stderr %q: want exit %d and one line naming %s", r.code, r.stderr, exitUsage, addr)
	}
}

// TestWatch_reconnects: watch outlives a restart of its redis-server on
// the same port, says on stderr that the stream was interrupted and that
// it resumed, and goes on printing the entries written after the restart.
func TestWatch_reconnects(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	ctx := context.Background()
	c := newLocks(t, s.Client(t), lock.WithAudit("lock:audit", 1000))
	cmd, lines, stderr := startWatchErr(t, s)
	errLines := make(chan string, 16)
	go func() { // stderr, where watch says it reconnects
		for stderr.Scan() {
			errLines <- stderr.Text()
		}
		close(errLines)
	}()
	if err := c.WithLock(ctx, "job:a", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	wantLines(t, lines, " acquired job:a ", " released job:a ")
	blockedInXRead(t, s) // the restart cuts a read under way
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.WithLock(ctx, "job:b", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	wantLines(t, lines, " acquired job:b ", " released job:b ")
	for _, want := range []string{"lockctl: watch: stream interrupted", "lockctl: watch: reconnected to " + s.Addr() + "; resumed after entry "} {
		select {
		case l := <-errLines:
			if !strings.Contains(l, want) {
				t.Errorf("watch stderr line %q, want %q", l, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no stderr line %q within 10s", want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("watch after SIGINT: %v", err)
	}
}

// blockedInXRead waits until s shows a client blocked in XREAD.
func blockedInXRead(t *testing.T, s *redistest.Server) {
	t.Helper()
	admin := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			t.Fatalf("watch never blocked in XREAD: %v", err)
		}
		for _, l := range strings.Split(list, "\n") {
			if strings.Contains(l, "cmd=xread") && strings.Contains(l, " flags=b ") {
				return
			}
		}
	}
}

// startWatchErr is startWatch with a line reader of stderr too.
func startWatchErr(t *testing.T, s *redistest.Server) (*exec.Cmd, *bufio.Scanner, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(bin, "watch")
	cmd.Env = append(os.Environ(), "REDIS_ADDR="+s.Addr())
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	_, lines := startCmd(t, s, cmd)
	return cmd, lines, bufio.NewScanner(errPipe)
}

// wantLines reads one line from lines per want, each containing it.
func wantLines(t *testing.T, lines *bufio.Scanner, want ...string) {
	t.Helper()
	for _, w := range want {
		if !lines.Scan() {
			t.Fatalf("watch ended: %v", lines.Err())
		}
		if l := lines.Text(); !strings.Contains(l, w) {
			t.Errorf("watch line %q, want %q", l, w)
		}
	}
}
