package redlock_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/redlock"
)

// TestErrors_prefixSaidOnce: the error of every verb names the package,
// the verb and the key once ("redlock: release \"k\": not held"), whatever
// it wraps — node errors in a QuorumError included: no "lock: " twice
// ("redlock: " ends with it).
func TestErrors_prefixSaidOnce(t *testing.T) {
	_, nodes := realNodes(t, 3)
	ctx := context.Background()
	c := newClient(t, nodes, redlock.WithBackoff(time.Millisecond, 5*time.Millisecond), loadTolerant)
	key := keyFor(t)
	holder := c.NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(ctx))
	lost := c.NewLock(key+":lost", redlock.WithTTL(time.Minute))
	must(t, "Acquire()", lost.Acquire(ctx))
	waitHolders(t, nodes, key+":lost", lost.Token(), 3)
	for _, rdb := range nodes {
		delKey(t, rdb, key+":lost")
	}
	lostExtend := lost.Extend(ctx, time.Minute) // finds the keys gone: lost
	closed := redlock.New(nodes)
	closed.Close()
	// A majority of the nodes refuse connections: no quorum.
	down := []redis.UniversalClient{nodes[0], refusing(t), refusing(t)}
	noQuorum := newClient(t, down, redlock.WithNodeTimeout(50*time.Millisecond))
	tryErr := func(l *redlock.Lock) error { _, err := l.TryAcquire(ctx); return err }

	for _, tt := range []struct {
		name string
		err  error
	}{
		{"empty key", c.NewLock("").Acquire(ctx)},
		{"invalid option", c.NewLock(key, redlock.WithTTL(0)).Acquire(ctx)},
		{"zero Lock", new(redlock.Lock).Acquire(ctx)},
		{"zero Client", new(redlock.Client).NewLock(key).Acquire(ctx)},
		{"Release never acquired", c.NewLock(key).Release(ctx)},
		{"Extend never acquired", c.NewLock(key).Extend(ctx, time.Second)},
		{"Extend ttl 0", holder.Extend(ctx, 0)},
		{"Acquire held handle", holder.Acquire(ctx)},
		{"Acquire after Close", closed.NewLock(key).Acquire(ctx)},
		{"Acquire wait timeout", c.NewLock(key, redlock.WithWaitTimeout(20*time.Millisecond)).Acquire(ctx)},
		{"TryAcquire no quorum", tryErr(noQuorum.NewLock(key))},
		{"Acquire no quorum", noQuorum.NewLock(key, redlock.WithWaitTimeout(100*time.Millisecond)).Acquire(ctx)},
		{"Extend of a lost hold", lostExtend},
		{"Release of a lost hold", lost.Release(ctx)},
		{"LostErr", lost.LostErr()},
		{"WithLock nil func", c.WithLock(ctx, key, nil)},
	} {
		if tt.err == nil {
			t.Fatalf("%s: error = nil, want one", tt.name)
		}
		if n := strings.Count(tt.err.Error(), "lock: "); n != 1 {
			t.Errorf("%s: error %q says \"lock: \" %d times, want once", tt.name, tt.err, n)
		}
	}
}

// refusing returns a client of a loopback port nothing listens on.
func refusing(t *testing.T) redis.UniversalClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen() error = %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, PoolSize: 100000})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

type ctxKey struct{}

// TestClient_WithObserver_eventsCarryCallerCtx: the events of a call
// carry the caller's context; background events (a loss found by renewal)
// carry none.
func TestClient_WithObserver_eventsCarryCallerCtx(t *testing.T) {
	_, nodes := realNodes(t, 3)
	var events []lock.Event
	var mu = make(chan struct{}, 1)
	obs := lock.ObserverFunc(func(e lock.Event) {
		mu <- struct{}{}
		events = append(events, e)
		<-mu
	})
	c := newClient(t, nodes, redlock.WithObserver(obs), loadTolerant)
	key := keyFor(t)
	ctx := context.WithValue(context.Background(), ctxKey{}, "caller")
	l := c.NewLock(key, redlock.WithTTL(900*time.Millisecond))
	must(t, "Acquire()", l.Acquire(ctx))
	must(t, "Extend()", l.Extend(ctx, time.Second))
	must(t, "Release()", l.Release(ctx))
	if ok, err := l.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("TryAcquire() = %v, %v, want true, nil", ok, err)
	}
	waitHolders(t, nodes, key, l.Token(), 3)
	for _, rdb := range nodes {
		delKey(t, rdb, key)
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatalf("Lost() not closed after every node dropped the key")
	}
	mu <- struct{}{}
	defer func() { <-mu }()
	if len(events) != 7 {
		t.Fatalf("%d events, want 7 (acquire start and end twice, extend, release, lost)", len(events))
	}
	for _, e := range events {
		caller := e.Ctx != nil && e.Ctx.Value(ctxKey{}) == "caller"
		if background := e.Kind == lock.EventLost; caller == background {
			t.Fatalf("%v event Ctx = %v, want the caller's for a call's events and nil for a loss", e.Kind, e.Ctx)
		}
	}
}
