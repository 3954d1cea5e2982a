package main

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/redlock"
)

// redlockImpls returns agentlock's redlock over nodes at its defaults.
func redlockImpls(nodes int) []impl {
	return []impl{{name: "redlock", open: func(rdbs []*redis.Client, s settings) (func(string) mutex, func()) {
		clients := make([]redis.UniversalClient, nodes)
		for i := range clients {
			clients[i] = rdbs[i]
		}
		var opts []redlock.Option
		if s.ttl > 0 {
			opts = append(opts, redlock.WithTTL(s.ttl))
		}
		c := redlock.New(clients, opts...)
		return func(key string) mutex { return rlMutex{l: c.NewLock(key)} }, func() { _ = c.Close() }
	}}}
}

type rlMutex struct{ l *redlock.Lock }

func (m rlMutex) tryAcquire(ctx context.Context) (bool, error) { return m.l.TryAcquire(ctx) }
func (m rlMutex) acquire(ctx context.Context) error            { return m.l.Acquire(ctx) }
func (m rlMutex) release(ctx context.Context) error            { return m.l.Release(ctx) }
