// Package admin holds the operators' verbs over the locks of
// github.com/agentlock/lock: Inspect and List, which read what a lock looks
// like in Redis, and ForceRelease and ForceReleaseToken, which free a lock
// whoever holds it. An Admin needs only a go-redis client and the locks'
// key prefix, and keeps no state but its settings. Each verb returns by its
// ctx's deadline: a call the client would not end then runs on a goroutine
// of its own (ContextTimeoutEnabled avoids it: see docs/operations.md).
//
// Its errors wrap the same sentinels as the lock package's, so
// errors.Is(err, lock.ErrNotHeld) and errors.Is(err, lock.ErrInvalid) match
// them.
package admin

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/adminhook"
	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// DefaultPrefix is the key prefix of an Admin made without [WithPrefix],
// the lock package's default.
const DefaultPrefix = "lock:"

// Admin runs the operators' verbs on the locks under one key prefix. Make
// it with [New]; it is safe for concurrent use.
type Admin struct {
	rdb    redis.UniversalClient
	prefix string
	stream string
	maxLen int64
	hooks  adminhook.Hooks
}

// Option configures an Admin in [New].
type Option func(*Admin)

// WithPrefix sets the key prefix of the locks the Admin works on, as the
// lock package's WithPrefix does. Default [DefaultPrefix].
func WithPrefix(p string) Option { return func(a *Admin) { a.prefix = p } }

// WithAudit records each force-release on the Redis stream named stream,
// capped at about maxLen entries (0: uncapped), as the lock package's
// WithAudit does. Default: none.
func WithAudit(stream string, maxLen int64) Option {
	return func(a *Admin) { a.stream, a.maxLen = stream, maxLen }
}

// New returns an Admin over rdb. rdb stays the caller's: the Admin never
// closes it.
func New(rdb redis.UniversalClient, opts ...Option) *Admin {
	a := &Admin{rdb: rdb, prefix: DefaultPrefix}
	for _, o := range opts {
		o(a)
	}
	_, a.hooks.Cluster = rdb.(*redis.ClusterClient)
	return a
}

func init() {
	adminhook.Set = func(a any, h adminhook.Hooks) { a.(*Admin).hooks = h }
}

// call runs one call to Redis, bounded as the Admin's maker asked; for an
// Admin of New, by ctx's deadline: when the client would not end the call
// then itself (adminhook.KeepsDeadlines), it runs on a goroutine of its
// own, and a call ctx cut short runs on until go-redis gives it up, its
// result dropped.
func (a *Admin) call(ctx context.Context, call func() error) error {
	if a.hooks.Call != nil {
		return a.hooks.Call(ctx, call)
	}
	if _, ok := ctx.Deadline(); !ok || adminhook.KeepsDeadlines(a.rdb) {
		return call()
	}
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return lease.Unanswered(ctx)
	}
}

// opKeys returns the keys of key for operator verb op, or its error.
func (a *Admin) opKeys(op, key string) (luascripts.Keys, error) {
	var err error
	switch {
	case a == nil || a.rdb == nil:
		err = lease.Invalidf("nil Admin: make it with admin.New")
	case key == "":
		err = lease.Invalidf("empty key")
	case a.hooks.Cluster && strings.HasPrefix(key, "}"):
		err = lease.Invalidf("key %q: on Redis Cluster a key must not start with '}'", key)
	}
	if err != nil {
		return luascripts.Keys{}, lease.NewOpError("lock", op, key, err)
	}
	return luascripts.NewKeys(a.prefix, key), nil
}
