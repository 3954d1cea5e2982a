package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

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

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
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
