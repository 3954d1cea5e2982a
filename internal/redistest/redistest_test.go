package redistest_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/redistest"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestServer_killRestart(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	ctx := ctxT(t, 20*time.Second)
	if err := rdb.Set(ctx, t.Name(), "v", 0).Err(); err != nil {
		t.Fatalf("Set() error = %v", err)
	}
	if got := s.Addr(); !strings.HasPrefix(got, "127.0.0.1:") || s.Port() == 6379 {
		t.Fatalf("Addr() = %q, want a free loopback port", got)
	}
	pid, port := s.Pid(), s.Port()

	s.Kill()
	if s.Running() {
		t.Fatal("Running() = true after Kill")
	}
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("Ping() after Kill error = nil, want a connection error")
	}
	s.Kill() // a second Kill is harmless

	if err := s.Restart(); err != nil {
		t.Fatalf("Restart() error = %v", err)
	}
	if s.Port() != port || s.Pid() == pid {
		t.Fatalf("after Restart port, pid = %d, %d; want %d and a new pid", s.Port(), s.Pid(), port)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("Ping() after Restart error = %v", err)
	}
	if err := rdb.Get(ctx, t.Name()).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("Get() after Restart error = %v, want redis.Nil (no persistence)", err)
	}

	s.Stop()
	s.Stop() // idempotent
	if err := s.Restart(); err == nil {
		t.Fatal("Restart() after Stop error = nil, want an error")
	}
	if err := s.Pause(); err == nil {
		t.Fatal("Pause() after Stop error = nil, want an error")
	}
}

func TestServer_pauseResume(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Config{})
	o := s.Options()
	o.ReadTimeout = 200 * time.Millisecond
	o.MaxRetries = -1
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := ctxT(t, 10*time.Second)

	if err := s.Pause(); err != nil {
		t.Fatalf("Pause() error = %v", err)
	}
	var ne net.Error
	if err := rdb.Ping(ctx).Err(); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Ping() while paused error = %v, want a timeout", err)
	}
	if err := s.Resume(); err != nil {
		t.Fatalf("Resume() error = %v", err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("Ping() after Resume error = %v", err)
	}
	if err := s.Pause(); err != nil {
		t.Fatalf("Pause() error = %v", err)
	}
	start := time.Now()
	s.Stop() // a paused server still stops on SIGTERM
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Stop() of a paused server took %v, want it to end on SIGTERM", d)
	}
}

func TestServer_passwordAndArgs(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Config{Password: "s3cret", Args: []string{"--maxmemory", "10mb"}})
	ctx := ctxT(t, 10*time.Second)
	got, err := s.Client(t).ConfigGet(ctx, "maxmemory").Result()
	if err != nil || got["maxmemory"] != "10485760" {
		t.Fatalf("ConfigGet(maxmemory) = %v, %v; want 10485760", got, err)
	}
	o := s.Options()
	o.Password = ""
	anon := redis.NewClient(o)
	defer anon.Close()
	if err := anon.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("Ping() without password error = %v, want NOAUTH", err)
	}
}

func TestServer_ACLSetUser(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Config{})
	ctx := ctxT(t, 10*time.Second)
	if err := s.ACLSetUser(ctx, "noscript", "pw", "~*", "&*", "+@all", "-@scripting"); err != nil {
		t.Fatalf("ACLSetUser() error = %v", err)
	}
	o := s.Options()
	o.Username, o.Password = "noscript", "pw"
	rdb := redis.NewClient(o)
	defer rdb.Close()
	if err := rdb.Set(ctx, t.Name(), "v", 0).Err(); err != nil {
		t.Fatalf("Set() as restricted user error = %v", err)
	}
	err := rdb.Eval(ctx, "return 1", nil).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("Eval() as restricted user error = %v, want NOPERM", err)
	}
	if err := s.ACLSetUser(ctx, "bad", "pw", "+nosuchcommand"); err == nil {
		t.Fatal("ACLSetUser(+nosuchcommand) error = nil, want the server's error")
	}
}

func TestStartServer_portTaken(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	s, err := redistest.StartServer(redistest.Config{Port: port})
	if err == nil {
		s.Stop()
		t.Fatal("StartServer() on a taken port error = nil, want an error")
	}
	if !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("StartServer() error = %v, want the log tail saying Address already in use", err)
	}
}

func TestFreePort(t *testing.T) {
	t.Parallel()
	port, err := redistest.FreePort()
	if err != nil || port <= 0 || port == 6379 {
		t.Fatalf("FreePort() = %d, %v", port, err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("Listen on FreePort() port: %v", err)
	}
	l.Close()
}
