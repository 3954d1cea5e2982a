package main

import (
	"context"
	"crypto/rand"
	"errors"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// mutex is one implementation's lock on one key for one hold: the
// harness makes a new one for every critical section, as WithLock,
// redislock.Obtain and redsync.NewMutex users do.
type mutex interface {
	tryAcquire(ctx context.Context) (bool, error) // one attempt
	acquire(ctx context.Context) error            // wait until held or ctx ends
	release(ctx context.Context) error
}

// settings are what a scenario asks of every implementation.
type settings struct {
	ttl time.Duration // 0: the implementation's default
}

// impl is one implementation under test.
type impl struct {
	name string
	// open builds it over rdbs (one client per node; single-node
	// implementations use rdbs[0]). close releases what open started.
	open func(rdbs []*redis.Client, s settings) (newMutex func(key string) mutex, close func())
}

var errNotHeld = errors.New("bench: release: not held")

// ttlOr returns s.ttl, or def when it is zero.
func (s settings) ttlOr(def time.Duration) time.Duration {
	if s.ttl > 0 {
		return s.ttl
	}
	return def
}

const peerTTL = 10 * time.Second // TTL for the floor and redislock, which need one

// ---- floor: raw go-redis, SET NX PX + EVALSHA compare-and-delete ----

var floorDel = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0`)

type floorMutex struct {
	rdb   *redis.Client
	key   string
	token string
	ttl   time.Duration
}

func floorImpl() impl {
	return impl{name: "floor", open: func(rdbs []*redis.Client, s settings) (func(string) mutex, func()) {
		ttl := s.ttlOr(peerTTL)
		return func(key string) mutex { return &floorMutex{rdb: rdbs[0], key: key, ttl: ttl} }, func() {}
	}}
}

func (m *floorMutex) tryAcquire(ctx context.Context) (bool, error) {
	if m.token == "" {
		m.token = rand.Text()
	}
	return m.rdb.SetNX(ctx, m.key, m.token, m.ttl).Result()
}

// acquire polls every millisecond.
func (m *floorMutex) acquire(ctx context.Context) error {
	var t *time.Timer
	for {
		ok, err := m.tryAcquire(ctx)
		if err != nil || ok {
			return err
		}
		if t == nil {
			t = time.NewTimer(time.Millisecond)
			defer t.Stop()
		} else {
			t.Reset(time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (m *floorMutex) release(ctx context.Context) error {
	n, err := floorDel.Run(ctx, m.rdb, []string{m.key}, m.token).Int64()
	if err == nil && n == 0 {
		err = errNotHeld
	}
	return err
}

// ---- bsm/redislock: no retry for TryAcquire, 1 ms linear backoff to wait ----

type bsmMutex struct {
	c   *redislock.Client
	key string
	ttl time.Duration
	l   *redislock.Lock
}

func bsmImpl() impl {
	return impl{name: "redislock", open: func(rdbs []*redis.Client, s settings) (func(string) mutex, func()) {
		c := redislock.New(rdbs[0])
		ttl := s.ttlOr(peerTTL)
		return func(key string) mutex { return &bsmMutex{c: c, key: key, ttl: ttl} }, func() {}
	}}
}

func (m *bsmMutex) tryAcquire(ctx context.Context) (bool, error) {
	l, err := m.c.Obtain(ctx, m.key, m.ttl, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		return false, nil
	}
	m.l = l
	return err == nil, err
}

func (m *bsmMutex) acquire(ctx context.Context) error {
	l, err := m.c.Obtain(ctx, m.key, m.ttl, &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)})
	m.l = l
	return err
}

func (m *bsmMutex) release(ctx context.Context) error {
	if m.l == nil {
		return errNotHeld
	}
	return m.l.Release(ctx)
}

// ---- go-redsync v4 over go-redis v9 ----

type redsyncMutex struct{ m *redsync.Mutex }

// redsyncImpl is go-redsync over every client in rdbs (one pool per node)
// with opts after the TTL.
func redsyncImpl(name string, nodes int, opts ...redsync.Option) impl {
	return impl{name: name, open: func(rdbs []*redis.Client, s settings) (func(string) mutex, func()) {
		pools := make([]redsyncredis.Pool, nodes)
		for i := range pools {
			pools[i] = goredis.NewPool(rdbs[i])
		}
		rs := redsync.New(pools...)
		all := opts
		if s.ttl > 0 {
			all = append([]redsync.Option{redsync.WithExpiry(s.ttl)}, opts...)
		}
		return func(key string) mutex { return &redsyncMutex{m: rs.NewMutex(key, all...)} }, func() {}
	}}
}

func (m *redsyncMutex) tryAcquire(ctx context.Context) (bool, error) {
	err := m.m.TryLockContext(ctx)
	var taken *redsync.ErrTaken
	var nodeTaken *redsync.ErrNodeTaken
	if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken) {
		return false, nil
	}
	return err == nil, err
}

func (m *redsyncMutex) acquire(ctx context.Context) error { return m.m.LockContext(ctx) }

func (m *redsyncMutex) release(ctx context.Context) error {
	ok, err := m.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errNotHeld
	}
	return err
}

// ---- agentlock, this project ----

type alMutex struct{ l *lock.Lock }

// agentlockImpl is the core with opts on its Client.
func agentlockImpl(name string, opts ...lock.Option) impl {
	return impl{name: name, open: func(rdbs []*redis.Client, s settings) (func(string) mutex, func()) {
		all := opts
		if s.ttl > 0 {
			all = append([]lock.Option{lock.WithTTL(s.ttl)}, opts...)
		}
		c := lock.NewClient(rdbs[0], all...)
		return func(key string) mutex { return alMutex{l: c.NewLock(key)} }, func() { _ = c.Close() }
	}}
}

// agentlockLockTTL is the core with the TTL given to each NewLock, as a
// user writes `locks.NewLock(key, lock.WithTTL(ttl))` per call, rather than
// to the Client: every lock then carries a configuration of its own.
func agentlockLockTTL(name string, ttl time.Duration) impl {
	return impl{name: name, open: func(rdbs []*redis.Client, _ settings) (func(string) mutex, func()) {
		c := lock.NewClient(rdbs[0])
		return func(key string) mutex { return alMutex{l: c.NewLock(key, lock.WithTTL(ttl))} }, func() { _ = c.Close() }
	}}
}

// agentlockSpread is the core with n Clients over one go-redis client: each
// new lock goes to the next Client in turn, so waiters of one key sit in
// different Clients, as in n processes, and a release reaches them by
// pub/sub rather than by a handoff inside one Client.
func agentlockSpread(name string, n int, opts ...lock.Option) impl {
	return impl{name: name, open: func(rdbs []*redis.Client, s settings) (func(string) mutex, func()) {
		all := opts
		if s.ttl > 0 {
			all = append([]lock.Option{lock.WithTTL(s.ttl)}, opts...)
		}
		cs := make([]*lock.Client, n)
		for i := range cs {
			cs[i] = lock.NewClient(rdbs[0], all...)
		}
		var next atomic.Int64
		newMutex := func(key string) mutex {
			return alMutex{l: cs[int(next.Add(1))%n].NewLock(key)}
		}
		return newMutex, func() {
			for _, c := range cs {
				_ = c.Close()
			}
		}
	}}
}

func (m alMutex) tryAcquire(ctx context.Context) (bool, error) { return m.l.TryAcquire(ctx) }
func (m alMutex) acquire(ctx context.Context) error            { return m.l.Acquire(ctx) }
func (m alMutex) release(ctx context.Context) error            { return m.l.Release(ctx) }

// countingObserver is the cheapest useful Observer: it counts events.
type countingObserver struct{ n atomic.Int64 }

// Observe counts e.
func (o *countingObserver) Observe(lock.Event) { o.n.Add(1) }

// pingImpl is not a lock: one PING per "acquire", nothing per release. It
// gives the round-trip time the locks are measured against.
func pingImpl() impl {
	return impl{name: "ping", open: func(rdbs []*redis.Client, _ settings) (func(string) mutex, func()) {
		return func(string) mutex { return pingMutex{rdbs[0]} }, func() {}
	}}
}

type pingMutex struct{ rdb *redis.Client }

func (p pingMutex) tryAcquire(ctx context.Context) (bool, error) {
	return true, p.rdb.Ping(ctx).Err()
}
func (p pingMutex) acquire(ctx context.Context) error { return p.rdb.Ping(ctx).Err() }
func (p pingMutex) release(context.Context) error     { return nil }
