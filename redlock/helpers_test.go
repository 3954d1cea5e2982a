package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
	"github.com/agentlock/lock/redlock"
)

// miniNodes starts n miniredis servers and a client for each.
func miniNodes(t *testing.T, n int) ([]*miniredis.Miniredis, []redis.UniversalClient) {
	t.Helper()
	ms := make([]*miniredis.Miniredis, n)
	rdbs := make([]redis.UniversalClient, n)
	for i := range n {
		ms[i] = miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: ms[i].Addr(), MaxRetries: -1, DialTimeout: time.Second})
		t.Cleanup(func() { rdb.Close() })
		rdbs[i] = rdb
	}
	return ms, rdbs
}

// realNodes starts n redis-server processes and a client for each.
func realNodes(t *testing.T, n int) ([]*redistest.Server, []redis.UniversalClient) {
	t.Helper()
	ss := make([]*redistest.Server, n)
	rdbs := make([]redis.UniversalClient, n)
	for i := range n {
		ss[i] = redistest.Start(t, redistest.Config{})
		rdb := redis.NewClient(&redis.Options{Addr: ss[i].Addr(), MaxRetries: -1,
			DialTimeout: time.Second, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		rdbs[i] = rdb
	}
	return ss, rdbs
}

// newClient returns a redlock Client closed by t.Cleanup.
func newClient(t *testing.T, nodes []redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c := redlock.New(nodes, opts...)
	t.Cleanup(func() { c.Close() })
	return c
}

// keyFor derives a key from the test's name.
func keyFor(t *testing.T) string {
	return strings.ReplaceAll(t.Name(), "/", ":")
}

func lockKey(key string) string { return "lock:{" + key + "}" }

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s error = %v, want nil", what, err)
	}
}

func wantIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s error = %v, want %v", what, err, target)
	}
}

var isClosed = kindtest.IsClosed

// wantLoss waits, at most 5s, for l's Lost channel and fails t unless
// LostErr is a *lock.LostError with reason want.
func wantLoss(t *testing.T, l *redlock.Lock, want lock.LossReason, what string) {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatalf("Lost() still open 5s after %s", what)
	}
	var le *lock.LostError
	if !errors.As(l.LostErr(), &le) || le.Reason != want {
		t.Fatalf("LostErr() after %s = %v, want a *LostError with reason %v", what, l.LostErr(), want)
	}
}

// holders counts the nodes whose lock key holds token.
func holders(t *testing.T, nodes []redis.UniversalClient, key, token string) int {
	t.Helper()
	n := 0
	for _, rdb := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v, err := rdb.Get(ctx, lockKey(key)).Result()
		cancel()
		if err == nil && v == token {
			n++
		}
	}
	return n
}

// keysLeft counts the nodes, among those answering, where the lock key exists.
func keysLeft(t *testing.T, nodes []redis.UniversalClient, key string) int {
	t.Helper()
	n := 0
	for _, rdb := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		k, err := rdb.Exists(ctx, lockKey(key)).Result()
		cancel()
		if err == nil && k > 0 {
			n++
		}
	}
	return n
}

// waitKeysGone waits, at most 5s, until none of nodes has key's lock, and
// fails the test, saying what was expected, otherwise.
func waitKeysGone(t *testing.T, nodes []redis.UniversalClient, key, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for keysLeft(t, nodes, key) > 0 {
		if time.Now().After(deadline) {
			pttl := nodes[0].PTTL(context.Background(), lockKey(key)).Val()
			t.Fatalf("%s: %d of %d nodes keep the key after 5s (PTTL on the first: %v)", what, keysLeft(t, nodes, key), len(nodes), pttl)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitHolders waits until want nodes hold token: Acquire returns at quorum
// and the other nodes' grants land just after.
func waitHolders(t *testing.T, nodes []redis.UniversalClient, key, token string, want int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for holders(t, nodes, key, token) < want {
		if time.Now().After(deadline) {
			t.Fatalf("nodes holding the token = %d, want %d", holders(t, nodes, key, token), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ownClients returns new go-redis clients for the same nodes.
func ownClients(t *testing.T, nodes []redis.UniversalClient) ([]*redis.Client, []redis.UniversalClient) {
	t.Helper()
	cs := make([]*redis.Client, len(nodes))
	out := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		o := n.(*redis.Client).Options()
		cs[i] = redis.NewClient(&redis.Options{Addr: o.Addr, MaxRetries: -1,
			DialTimeout: o.DialTimeout, ContextTimeoutEnabled: o.ContextTimeoutEnabled})
		t.Cleanup(func() { cs[i].Close() })
		out[i] = cs[i]
	}
	return cs, out
}

// hookableNodes is realNodes with redlock's scripts loaded on every node,
// so that each call is one EVALSHA (no NOSCRIPT retry as EVAL) and a
// scriptHook sees it once.
func hookableNodes(t *testing.T, n int) ([]*redistest.Server, []redis.UniversalClient) {
	t.Helper()
	ss, nodes := realNodes(t, n)
	ctx := context.Background()
	for i, rdb := range nodes {
		for _, s := range []*redis.Script{luascripts.Acquire, luascripts.Release, luascripts.Extend, luascripts.FenceRaise, luascripts.Undo} {
			if err := s.Load(ctx, rdb).Err(); err != nil {
				t.Fatalf("node %d: SCRIPT LOAD error = %v", i, err)
			}
		}
	}
	return ss, nodes
}

// setOther makes rdb hold key for another holder, for a minute.
func setOther(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	must(t, "SET other holder", rdb.Set(context.Background(), lockKey(key), "other-holder", time.Minute).Err())
}

// delKey deletes key's lock on rdb.
func delKey(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	must(t, "DEL", rdb.Del(context.Background(), lockKey(key)).Err())
}

// scriptHook holds calls of one script on one node's client, to open a
// timing window deterministically. A held call waits for a value on allow
// (one per call), or for allow to be closed (open). With reply false the
// command itself is held, as if delayed on the wire: it is then sent even
// if its caller's deadline has passed. With reply true the command runs at
// once and only its reply is held back.
type scriptHook struct {
	sha     string
	hold    func(n int) bool // which calls (numbered from 1) to hold
	reply   bool
	calls   atomic.Int32
	arrived chan int      // the number of each held call, as it arrives
	passed  chan int      // the number of each held call, once it returned
	allow   chan struct{} // one value lets one held call on; closed, all
	once    sync.Once
}

// hookScript adds a scriptHook on node rdb (a *redis.Client) for script s,
// holding the calls for which hold is true; t.Cleanup opens it.
func hookScript(t *testing.T, rdb redis.UniversalClient, s *redis.Script, reply bool, hold func(n int) bool) *scriptHook {
	t.Helper()
	h := &scriptHook{sha: s.Hash(), hold: hold, reply: reply,
		arrived: make(chan int, 1000), passed: make(chan int, 1000), allow: make(chan struct{})}
	rdb.(*redis.Client).AddHook(h)
	t.Cleanup(h.open)
	return h
}

// every holds every call; first(k) the first k.
func every(int) bool             { return true }
func first(k int) func(int) bool { return func(n int) bool { return n <= k } }

func (h *scriptHook) open() { h.once.Do(func() { close(h.allow) }) }

// await waits for a value on ch (arrived or passed).
func (h *scriptHook) await(t *testing.T, ch chan int, what string) int {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not seen in 10s", what)
		return 0
	}
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook treats a pipeline carrying the script (the renewal
// loop sends one per node for a batch of holds) as one call of it.
func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if h.matches(cmd) {
				return h.call(ctx, func(ctx context.Context) error { return next(ctx, cmds) })
			}
		}
		return next(ctx, cmds)
	}
}

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !h.matches(cmd) {
			return next(ctx, cmd)
		}
		return h.call(ctx, func(ctx context.Context) error { return next(ctx, cmd) })
	}
}

// matches reports whether cmd is an EVALSHA of the hook's script.
func (h *scriptHook) matches(cmd redis.Cmder) bool {
	args := cmd.Args()
	return len(args) >= 2 && cmd.Name() == "evalsha" && args[1] == h.sha
}

// call runs one call of the script through send, holding it (or its reply)
// when the hook's hold says so.
func (h *scriptHook) call(ctx context.Context, send func(context.Context) error) error {
	n := int(h.calls.Add(1))
	if !h.hold(n) {
		return send(ctx)
	}
	defer func() { h.passed <- n }()
	if h.reply {
		err := send(ctx)
		h.arrived <- n
		<-h.allow
		return err
	}
	h.arrived <- n
	<-h.allow
	return send(context.WithoutCancel(ctx))
}
