package main

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestS1Pair_everyImplTakesTheSameTurns runs one quick round on a real
// redis-server: every implementation makes ops, the same number each.
func TestS1Pair_everyImplTakesTheSameTurns(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	e := &env{ctx: context.Background(), quick: true, rounds: 1,
		servers: []*redistest.Server{srv}, admin: []*redis.Client{srv.Client(t)}, res: &results{}}
	if err := e.s1pair(); err != nil {
		t.Fatalf("s1pair() error = %v", err)
	}
	tb := e.res.Tables[0]
	want := tb.Rows["floor"].Rounds[0]["n"]
	if want < 10 {
		t.Fatalf("floor made %v ops in a quick round, want at least 10", want)
	}
	for _, im := range s1PairImpls() {
		if got := tb.Rows[im.name].Rounds[0]["n"]; got != want {
			t.Errorf("%s made %v ops, floor %v: every implementation takes one turn per cycle", im.name, got, want)
		}
	}
	var limits []string
	for _, tg := range e.res.Targets {
		limits = append(limits, tg.ID+" "+tg.Limit)
	}
	// p50 and ops/s against redislock: agentlock within 2.5 %, al-bare
	// within 1 %, and agentlock level as a stretch.
	want6 := []string{"S1P <= 1.025", "S1P >= 0.975", "S1P <= 1.01", "S1P >= 0.99", "S1P* <= 1", "S1P* >= 1"}
	if !slices.Equal(limits, want6) {
		t.Errorf("s1pair checked %q, want %q", limits, want6)
	}
}

// TestScriptsImpl_holdsAsTheLibraryDoes: al-scripts' acquire takes the lock
// as the library sees it, and its release frees it, so the row measures
// the library's own scripts.
func TestScriptsImpl_holdsAsTheLibraryDoes(t *testing.T) {
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	ctx := context.Background()
	newMutex, closeFn := scriptsImpl().open([]*redis.Client{rdb}, settings{})
	defer closeFn()
	c := lock.NewClient(rdb)
	defer c.Close()

	m := newMutex("job")
	if ok, err := m.tryAcquire(ctx); err != nil || !ok {
		t.Fatalf("al-scripts tryAcquire() = %v, %v; want true, nil", ok, err)
	}
	other := c.NewLock("job")
	if ok, err := other.TryAcquire(ctx); err != nil || ok {
		t.Fatalf("library TryAcquire() while al-scripts holds = %v, %v; want false, nil", ok, err)
	}
	if err := m.release(ctx); err != nil {
		t.Fatalf("al-scripts release() error = %v", err)
	}
	if ok, err := other.TryAcquire(ctx); err != nil || !ok {
		t.Fatalf("library TryAcquire() after al-scripts released = %v, %v; want true, nil", ok, err)
	}
	if err := m.release(ctx); err == nil {
		t.Errorf("al-scripts release() of a lock the library holds = nil, want an error")
	}
	_ = other.Release(ctx)
}
