package lock

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// rwMarkTTL is how long a writer's waiting mark lives: twice the most a
// waiter sleeps between attempts, so a live writer renews it in time.
func (s *settings) rwMarkTTL() time.Duration {
	return max(2*s.backoffMax, 200*time.Millisecond)
}

// rwKind is a read-write lock's handle as the engine sees it (lease.Kind).
type rwKind Lock

// Token returns a random UUID v4.
func (k *rwKind) Token() (string, error) { return lease.NewToken() }

// Try sends one acquire of Acquire: a writer that must wait marks itself
// waiting.
func (k *rwKind) Try(ctx context.Context, token string) lease.Attempt {
	return k.try(ctx, token, k.cfg.rwMarkTTL())
}

// rwTry is a read-write lock's handle as TryAcquire passes it to the
// engine: a writer's one attempt marks nothing, since it will not come
// back. A struct of one pointer costs no allocation as an interface.
type rwTry struct{ *rwKind }

// Try sends one acquire.
func (k rwTry) Try(ctx context.Context, token string) lease.Attempt { return k.try(ctx, token, 0) }

// try sends one acquire; a writer that must wait marks itself waiting for
// mark (0: not).
func (k *rwKind) try(ctx context.Context, token string, mark time.Duration) lease.Attempt {
	start := time.Now()
	cfg := k.cfg
	args := []any{token, ttlArg(cfg.ttl), k.rw.mode, flag(cfg.fencing), ms(mark)}
	if cfg.info != nil {
		args = append(args, cfg.info)
	}
	n, err := rwRun(ctx, (*Lock)(k).rwBackend(), k.cfg.rwAudit(&k.hd.Keys, token, 0), luascripts.RWAcquire, 0, false, k.rw.acquireKeys, args...)
	if err != nil {
		if kerr := rwOtherKind(k.hd.Keys.User, err, "read-write lock"); kerr != nil {
			return lease.Attempt{Err: kerr, Final: true}
		}
		return lease.Attempt{Err: err, Unknown: sent(err), Final: !retryable(err)}
	}
	ok, fence, left := luascripts.AcquireReply(n)
	return lease.Attempt{OK: ok, Fence: fence, Sent: start, PTTL: left}
}

// Undo removes what an attempt with token may have set: its hold, and its
// waiting mark.
func (k *rwKind) Undo(ctx context.Context, token string) { _, _ = (*Lock)(k).rwRelease(ctx, token, 0) }

// Release drops h. A read-write lock's release hands nothing over: it
// wakes every waiter when it frees the lock.
func (k *rwKind) Release(ctx context.Context, h *lease.Hold, _ bool) lease.Outcome {
	return (*kind)(k).checkForced(ctx, h, outcome((*Lock)(k).rwRelease(ctx, h.Token(), h.Fence())))
}

func (l *Lock) rwRelease(ctx context.Context, token string, fence int64) (extendStatus, error) {
	n, err := rwRun(ctx, l.rwBackend(), l.cfg.rwAudit(&l.hd.Keys, token, fence), luascripts.RWRelease, 1, true, l.rw.releaseKeys, token)
	return checkStatus("release", n, err)
}

// CheckTTL refuses a TTL Redis cannot hold.
func (k *rwKind) CheckTTL(ttl time.Duration) error { return (*kind)(k).CheckTTL(ttl) }

// Extend sends one extend of h.
func (k *rwKind) Extend(ctx context.Context, h *lease.Hold, ttl time.Duration) (lease.Outcome, <-chan struct{}) {
	n, err := rwRun(ctx, (*Lock)(k).rwBackend(), k.cfg.rwAudit(&k.hd.Keys, h.Token(), h.Fence()), luascripts.RWExtend, 2, false, k.rw.lockKeys, h.Token(), ttlArg(ttl))
	return (*kind)(k).checkForced(ctx, h, outcome(checkStatus("extend", n, err))), nil
}

// rwPTTL is TTL's call for a read-write hold (see pttl).
func (l *Lock) rwPTTL(ctx context.Context, token string) (time.Duration, error) {
	return pttlReply(rwRun(ctx, l.rwBackend(), nil, luascripts.RWPTTL, 3, false, l.rw.lockKeys, token))
}

// rwBackend is what a read-write lock's scripts go through: its backend
// (a read-write lock is always in script mode).
func (l *Lock) rwBackend() *scriptBackend { return l.cfg.be.(*scriptBackend) }

// rwRun sends script (luascripts.RWAll[i]) by EVALSHA, then by EVAL if the
// server lacks it, each command once when once is set (a release: see
// luascripts.OnceCmd), and returns its integer reply. With au, it sends
// the script's audited variant, which writes au's entry (audit_script.go).
func rwRun(ctx context.Context, b *scriptBackend, au *auditCall, s *redis.Script, i int, once bool, keys []string, args ...any) (int64, error) {
	src := luascripts.RWSources[i]
	if au != nil {
		s, src = luascripts.Audited(s)
		keys, args = luascripts.AuditArgs(keys, args, au.stream, &au.e, nil)
	}
	s, src = b.pub.script(ctx, s, src)
	n, err := rwSend(ctx, b, "evalsha", s.Hash(), once, keys, args)
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The server ran nothing: sending the whole script is safe.
		n, err = rwSend(ctx, b, "eval", src, once, keys, args)
	}
	return n, err
}

// rwSend sends one command through the Client's coalescer, unless
// coalescing is off. A call that made it into a shared pipeline waits for
// its reply even when ctx ends (the mutex's extend does the same): so the
// undo of an acquire never overtakes it. The verb returns by its deadline
// all the same, the call running bounded (see keepsDeadlines). A call still
// queued when ctx ends is never sent (sent reports false).
func rwSend(ctx context.Context, b *scriptBackend, verb, script string, once bool, keys []string, args []any) (int64, error) {
	cmd := redis.NewIntCmd(ctx, evalArgs(verb, script, keys, args)...)
	if err := b.processScript(ctx, cmd, keys[0], once, false); err != nil {
		return 0, err
	}
	return cmd.Result()
}

// rwOtherKind is the error for a script's "KIND <kind>" reply: the key holds
// another kind of lock than want. nil for any other error.
func rwOtherKind(key string, err error, want string) error {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return nil
	}
	msg := rerr.Error()
	if !strings.HasPrefix(msg, "KIND ") {
		return nil
	}
	// A script error reply may carry the script's location after the kind.
	found := strings.Fields(msg[len("KIND "):])
	if len(found) == 0 {
		return nil
	}
	name := found[0]
	if name == "rw" {
		name = "read-write lock"
	}
	return invalidf("key %q is a %s, not a %s", key, name, want)
}
