package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
	"github.com/agentlock/lock/redlock"
)

const nodeTimeout = 150 * time.Millisecond

// cluster is five real servers; the first `slow` of them are reached
// through a toxiproxy proxy.
type cluster struct {
	direct  []redis.UniversalClient // straight to each server
	nodes   []redis.UniversalClient // what redlock uses
	proxies []*toxiproxy.Proxy
}

func startCluster(t *testing.T, slow int) *cluster {
	t.Helper()
	c := &cluster{}
	for i := range 5 {
		s := redistest.Start(t, redistest.Config{})
		c.direct = append(c.direct, s.Client(t))
		addr := s.Addr()
		if i < slow {
			srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
			p := toxiproxy.NewProxy(srv, "redis", "127.0.0.1:0", addr)
			if err := p.Start(); err != nil {
				t.Fatalf("toxiproxy start: %v", err)
			}
			t.Cleanup(p.Stop)
			c.proxies = append(c.proxies, p)
			addr = p.Listen
		}
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		c.nodes = append(c.nodes, rdb)
	}
	return c
}

// slowDown delays every reply of each proxied node by d.
func (c *cluster) slowDown(t *testing.T, d time.Duration) {
	t.Helper()
	for _, p := range c.proxies {
		js := fmt.Sprintf(`{"name":"lat","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, d.Milliseconds())
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			t.Fatalf("add latency toxic: %v", err)
		}
	}
}

func (c *cluster) heal(t *testing.T) {
	t.Helper()
	for _, p := range c.proxies {
		if err := p.Toxics.RemoveToxic(context.Background(), "lat"); err != nil {
			t.Fatalf("remove toxic: %v", err)
		}
	}
}

// keysLeft counts the servers where key's lock exists.
func (c *cluster) keysLeft(t *testing.T, key string) int {
	t.Helper()
	n := 0
	for _, rdb := range c.direct {
		if rdb.Exists(context.Background(), "lock:{"+key+"}").Val() > 0 {
			n++
		}
	}
	return n
}

func TestSlowNode_acquiresViaOthers(t *testing.T) {
	c := startCluster(t, 1)
	c.slowDown(t, time.Second) // far past the node timeout
	rl := redlock.New(c.nodes, redlock.WithNodeTimeout(nodeTimeout), redlock.WithTTL(time.Second))
	defer rl.Close()
	ctx := context.Background()
	l := rl.NewLock(t.Name())

	start := time.Now()
	if err := l.Acquire(ctx); err != nil {
		t.Fatalf("Acquire(one node slowed) error = %v, want nil", err)
	}
	acq := time.Since(start)
	if v := l.Validity(); v <= 0 || v > time.Second {
		t.Fatalf("Validity() = %v, want in (0, 1s]", v)
	}
	// Renewal (every TTL/3) goes on via the four fast nodes.
	time.Sleep(2500 * time.Millisecond)
	select {
	case <-l.Lost():
		t.Fatalf("Lost() closed with one slow node: %v", l.LostErr())
	default:
	}
	start = time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release() error = %v, want nil", err)
	}
	rel := time.Since(start)
	t.Logf("one node slowed by 1s, node timeout %v: Acquire %v, Release %v", nodeTimeout, acq, rel)
	if acq > nodeTimeout+time.Second || rel > nodeTimeout+time.Second {
		t.Fatalf("Acquire %v / Release %v, want about the node timeout %v at most", acq, rel, nodeTimeout)
	}
	c.heal(t)
}

func TestSlowMajority_failsAndCleansUp(t *testing.T) {
	c := startCluster(t, 3)
	c.slowDown(t, time.Second)
	rl := redlock.New(c.nodes, redlock.WithNodeTimeout(nodeTimeout), redlock.WithTTL(10*time.Second))
	defer rl.Close()
	ctx := context.Background()
	key := t.Name()
	l := rl.NewLock(key)

	start := time.Now()
	ok, err := l.TryAcquire(ctx)
	took := time.Since(start)
	var qe *redlock.QuorumError
	if ok || !errors.As(err, &qe) || !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("TryAcquire(3 of 5 slowed) = %v, %v; want false and a *QuorumError", ok, err)
	}
	t.Logf("3 of 5 nodes slowed by 1s, node timeout %v: TryAcquire failed after %v (%v)", nodeTimeout, took, err)
	if took > nodeTimeout+2*time.Second {
		t.Fatalf("TryAcquire took %v, want about twice the node timeout %v", took, nodeTimeout)
	}
	// The slow nodes did take the key (only their replies are late); the
	// undo reaches them, so nothing is left for the 10s TTL to clear.
	if n := c.keysLeft(t, key); n != 0 {
		t.Fatalf("servers with the key after a failed TryAcquire = %d, want 0", n)
	}
	c.heal(t)
	if err := l.Acquire(ctx); err != nil {
		t.Fatalf("Acquire(healed) error = %v, want nil", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release() error = %v, want nil", err)
	}
}
