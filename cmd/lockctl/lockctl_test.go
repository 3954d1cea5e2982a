package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// holdAll acquires each lock, releasing it at the end of the test.
func holdAll(t *testing.T, ls ...*lock.Lock) {
	t.Helper()
	for _, l := range ls {
		if err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Release(context.Background()) })
	}
}

func newLocks(t *testing.T, rdb redis.UniversalClient, opts ...lock.Option) *lock.Client {
	t.Helper()
	c := lock.NewClient(rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// seed holds two mutexes and two permits of a semaphore, with pinned owner
// and metadata, and returns the client.
func seed(t *testing.T, rdb redis.UniversalClient) *lock.Client {
	t.Helper()
	c := newLocks(t, rdb, lock.WithTTL(time.Minute), lock.WithFencing(true))
	sem := c.NewSemaphore("quota:llm", 3, lock.WithMetadata("batch 9"))
	holdAll(t,
		c.NewLock("session:42", lock.WithOwner("agent-1"), lock.WithMetadata("req 7f3a")),
		c.NewLock("session:43", lock.WithOwner("agent-2"), lock.WithMetadata("req 11")),
		sem.Permit(), sem.Permit())
	return c
}

func TestListInspect_golden(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	seed(t, s.Client(t))
	norm := normaliser(t)

	r := ctl(t, s.Addr(), "list")
	if r.code != 0 {
		t.Fatalf("list: exit %d: %s", r.code, r.stderr)
	}
	golden(t, "list.golden", sortRows(norm(r.stdout), "KEY"))

	r = ctl(t, s.Addr(), "list", "session:*")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 3 || strings.Contains(r.stdout, "quota") {
		t.Errorf("list session:*: exit %d, %q", r.code, r.stdout)
	}

	r = ctl(t, s.Addr(), "inspect", "session:42")
	if r.code != 0 {
		t.Fatalf("inspect: exit %d: %s", r.code, r.stderr)
	}
	golden(t, "inspect.golden", norm(r.stdout))

	r = ctl(t, s.Addr(), "inspect", "quota:llm")
	if r.code != 0 {
		t.Fatalf("inspect: exit %d: %s", r.code, r.stderr)
	}
	golden(t, "inspect_semaphore.golden", sortRows(norm(r.stdout), "TOKEN"))
}

func TestJSON_parsedBack(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	c := seed(t, rdb)
	ctx := context.Background()
	host, _ := os.Hostname()

	r := ctl(t, s.Addr(), "--json", "list")
	if r.code != 0 {
		t.Fatalf("list --json: exit %d: %s", r.code, r.stderr)
	}
	got := map[string]jsonInfo{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var j jsonInfo
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got[j.Key] = j
	}
	if len(got) != 3 {
		t.Fatalf("list --json: %d locks, want 3: %s", len(got), r.stdout)
	}
	for key, j := range got {
		want, err := c.Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if j.Kind != want.Kind || j.Fence != want.Fence || len(j.Holders) != len(want.Holders) {
			t.Errorf("%s: got %+v, Inspect %+v", key, j, want)
			continue
		}
		byToken := map[string]lock.Holder{}
		for _, h := range want.Holders {
			byToken[h.Token] = h
		}
		for _, h := range j.Holders {
			w, ok := byToken[h.Token]
			if !ok || h.Owner != w.Owner || h.Fence != w.Fence || h.Metadata != w.Metadata ||
				h.PID != w.PID || h.Host != w.Host || h.TTLMs <= 0 || h.TTLMs > time.Minute.Milliseconds() {
				t.Errorf("%s: holder %+v, Inspect %+v", key, h, w)
			}
			if w.Since.IsZero() {
				// Every hold seeded writes holder info: mutexes and permits.
				t.Errorf("%s: holder %+v has no holder info", key, w)
				continue
			}
			since, err := time.Parse(time.RFC3339Nano, h.Since)
			if err != nil || !since.Equal(w.Since) || h.PID != os.Getpid() || h.Host != host {
				t.Errorf("%s: holder %+v (%v), Inspect %+v", key, h, err, w)
			}
		}
	}

	// inspect --json prints one object: the same as list's line.
	r = ctl(t, s.Addr(), "inspect", "session:42", "--json")
	var j jsonInfo
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || r.code != 0 {
		t.Fatalf("inspect --json: exit %d, %q: %v", r.code, r.stdout, err)
	}
	if j.Key != "session:42" || len(j.Holders) != 1 || j.Holders[0].Owner != "agent-1" || j.Holders[0].Metadata != "req 7f3a" ||
		j.Holders[0].Token != got["session:42"].Holders[0].Token {
		t.Errorf("inspect --json: %+v", j)
	}
}

func TestExitCodes(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	c := newLocks(t, rdb, lock.WithTTL(time.Minute))
	held := c.NewLock("job:held")
	holdAll(t, held)

	down := redistest.Start(t, redistest.Config{})
	downAddr := down.Addr()
	down.Stop()

	for _, tc := range []struct {
		name   string
		addr   string
		args   []string
		code   int
		stderr string
	}{
		{"help", s.Addr(), []string{"-help"}, 0, "Exit codes:"},
		{"no command", s.Addr(), nil, 2, "Usage:"},
		{"unknown command", s.Addr(), []string{"frob"}, 2, `unknown command "frob"`},
		{"unknown flag", s.Addr(), []string{"list", "--nope"}, 2, "nope"},
		{"inspect without key", s.Addr(), []string{"inspect"}, 2, "usage: lockctl inspect KEY"},
		{"inspect free key", s.Addr(), []string{"inspect", "job:free"}, 1, "not held"},
		{"release free key", s.Addr(), []string{"release", "--force", "job:free"}, 1, "not held"},
		{"release other token", s.Addr(), []string{"release", "--force", "--token", "nobody", "job:held"}, 1, "no hold with token nobody on job:held"},
		{"release other token, free key", s.Addr(), []string{"release", "--force", "--token", "nobody", "job:free"}, 1, "not held"},
		{"release empty token", s.Addr(), []string{"release", "--force", "--token", "", "job:held"}, 2, "empty token"},
		{"release empty token=", s.Addr(), []string{"release", "--force", "--token=", "job:held"}, 2, "empty token"},
		{"release without --force", s.Addr(), []string{"release", "job:held"}, 2, "refused without --force"},
		{"bad address", "nohostport", []string{"list"}, 2, "want host:port"},
		{"connection refused", downAddr, []string{"list"}, 2, "connect " + downAddr},
		{"connection refused, fences", downAddr, []string{"fences"}, 2, "connect"},
		{"wrong type", s.Addr(), []string{"inspect", "job:string"}, 2, "no lock kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "wrong type" {
				if err := rdb.RPush(context.Background(), "lock:{job:string}", "x").Err(); err != nil {
					t.Fatal(err)
				}
			}
			r := ctl(t, tc.addr, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, tc.code, tc.stderr)
			}
		})
	}
	// Refused, the lock is still held.
	if _, err := held.TTL(context.Background()); err != nil {
		t.Fatalf("after a refused release: %v", err)
	}
	r := ctl(t, s.Addr(), "inspect", "job:held")
	if r.code != 0 {
		t.Fatalf("inspect held: exit %d: %s", r.code, r.stderr)
	}

	// With --force the holder loses the lock, and a second release finds nothing.
	r = ctl(t, s.Addr(), "release", "job:held", "--force")
	if r.code != 0 || r.stdout != "released job:held\n" {
		t.Fatalf("release --force: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	<-held.Lost()
	var lost *lock.LostError
	if !errors.As(held.LostErr(), &lost) || lost.Reason != lock.LossForceReleased {
		t.Errorf("holder's loss: %v", held.LostErr())
	}
	if r := ctl(t, s.Addr(), "release", "--force", "job:held"); r.code != 1 {
		t.Errorf("second release: exit %d", r.code)
	}
}

func TestReleaseToken(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	c := newLocks(t, rdb, lock.WithTTL(time.Minute), lock.WithAudit("lock:audit", 100))
	sem := c.NewSemaphore("quota", 2)
	p1, p2 := sem.Permit(), sem.Permit()
	holdAll(t, p1, p2) // creates lock:audit: release records to it
	r := ctl(t, s.Addr(), "--json", "release", "--force", "--token", p1.Token(), "quota")
	var out struct {
		Key, Token string
		Released   bool
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 || !out.Released || out.Token != p1.Token() {
		t.Fatalf("release --token: exit %d, %q, %q: %v", r.code, r.stdout, r.stderr, err)
	}
	<-p1.Lost()
	info, err := c.Inspect(context.Background(), "quota")
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Token != p2.Token() {
		t.Errorf("after release --token: %+v, %v", info, err)
	}
	xs, err := rdb.XRange(context.Background(), "lock:audit", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	forced := 0
	for _, x := range xs {
		if x.Values["event"] == "force-released" {
			forced++
			if x.Values["key"] != "quota" || x.Values["token"] != p1.Token() {
				t.Errorf("audit entry %v", x.Values)
			}
		}
	}
	if forced != 1 {
		t.Errorf("%d force-released entries on lock:audit, want 1: %v", forced, xs)
	}
}

// startWatch starts lockctl watch and returns a line reader of its
// stdout, once its XREAD is blocked on the server.
func startWatch(t *testing.T, s *redistest.Server, args ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"watch"}, args...)...)
	cmd.Env = append(os.Environ(), "REDIS_ADDR="+s.Addr())
	return startCmd(t, s, cmd)
}

// startCmd starts cmd, a lockctl watch, and returns a line reader of its
// stdout, once its XREAD is blocked on the server.
func startCmd(t *testing.T, s *redistest.Server, cmd *exec.Cmd) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	blockedInXRead(t, s)
	return cmd, bufio.NewScanner(out)
}

func TestWatch(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	ctx := context.Background()
	c := newLocks(t, rdb, lock.WithAudit("lock:audit", 1000), lock.WithMetadata("m1"))
	// Written before watch starts: not shown (watch starts at the end).
	if err := c.WithLock(ctx, "job:before", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	cmd, lines := startWatch(t, s)
	if err := c.WithLock(ctx, "job:during", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{" acquired job:during ", " released job:during "} {
		if !lines.Scan() {
			t.Fatalf("watch ended: %v", lines.Err())
		}
		if l := lines.Text(); !strings.Contains(l, want) || !strings.Contains(l, "metadata=m1") {
			t.Errorf("watch line %q, want %q", l, want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("watch after SIGINT: %v", err)
	}

	// --json --from 0: the whole stream, one object per line.
	cmd, lines = startWatch(t, s, "--json", "--from", "0", "--stream", "lock:audit")
	var events []string
	for len(events) < 4 && lines.Scan() {
		var e map[string]string
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", lines.Text(), err)
		}
		if e["id"] == "" || e["metadata"] != "m1" {
			t.Errorf("entry %v", e)
		}
		events = append(events, e["event"]+" "+e["key"])
	}
	want := "acquired job:before,released job:before,acquired job:during,released job:during"
	if strings.Join(events, ",") != want {
		t.Errorf("events %q, want %q", events, want)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("watch after SIGINT: %v", err)
	}
}

func TestCluster_listFences(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	rdb := cl.Client(t)
	ctx := context.Background()
	c := newLocks(t, rdb, lock.WithTTL(time.Minute), lock.WithFencing(true))
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	masters := map[string]bool{}
	for _, k := range keys {
		holdAll(t, c.NewLock(k))
		m, err := cl.MasterForKey(ctx, "lock:{"+k+"}")
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Addr()] = true
	}
	if len(masters) < 2 {
		t.Fatalf("keys on %d masters only", len(masters))
	}
	// A stray key of the library's shape without a TTL, and one that is not the library's.
	if err := rdb.Set(ctx, "lock:{stray}:fence", 7, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "lock:other", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	seeds := strings.Join(cl.Addrs(), ",")

	r := ctl(t, "", "--cluster", seeds, "list", "--json")
	if r.code != 0 {
		t.Fatalf("list: exit %d: %s", r.code, r.stderr)
	}
	found := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var j jsonInfo
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatal(err)
		}
		found[j.Key] = j.Kind == "mutex" && len(j.Holders) == 1
	}
	for _, k := range keys {
		if !found[k] {
			t.Errorf("list misses %q: %v", k, found)
		}
	}

	r = ctl(t, cl.Addrs()[0], "--cluster", "1", "fences", "--json")
	var rep fenceReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("fences: exit %d, %q, %q: %v", r.code, r.stdout, r.stderr, err)
	}
	if rep.Masters != 3 || rep.FenceKeys != len(keys)+1 {
		t.Errorf("fences: %+v, want 3 masters and %d fence keys", rep, len(keys)+1)
	}
	if rep.NoTTL != 1 || len(rep.NoTTLKeys) != 1 || rep.NoTTLKeys[0] != "lock:{stray}:fence" {
		t.Errorf("fences: keys without TTL %v, want [lock:{stray}:fence]", rep.NoTTLKeys)
	}

	r = ctl(t, "", "--cluster", seeds, "inspect", "e")
	if r.code != 0 || !strings.Contains(r.stdout, "kind:     mutex") {
		t.Errorf("inspect on the cluster: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
}
