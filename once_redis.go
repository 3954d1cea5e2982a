package lock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
)

// onceAcquire runs once_acquire.lua with keys (acquire.lua's, then the
// result key) for token: the stored result (a string), or acquire.lua's
// reply (an int64). A hold taken writes info as its holder info (nil:
// none; keys then carry no holder-info hash). With au, its audited variant
// writes the entry.
func (b *scriptBackend) onceAcquire(ctx context.Context, keys []string, token string, ttl time.Duration, info any, au *auditCall) (any, error) {
	args := []any{token, ttlArg(ttl), argZero, flag(b.fencing)}
	if info != nil {
		args = append(args, argEmpty, info)
	}
	cmd := b.runOnceScript(ctx, luascripts.OnceAcquire, luascripts.OnceAcquireSrc, keys, false, au, args...)
	if err := cmd.Err(); err != nil {
		var u unansweredError
		if errors.As(err, &u) {
			b.leftUnanswered(token, u.settled)
		}
		return nil, err
	}
	return cmd.Val(), nil
}

// onceStore runs once_store.lua: it stores out for ttl and releases token's
// hold, with its holder info when b writes any, publishing msg. Each
// command is sent once by go-redis (the caller resends, the script being
// safe to run twice). With au, its audited variant writes the entry (once:
// a resent store finds the hold gone).
func (b *scriptBackend) onceStore(ctx context.Context, k *keys, result, token string, out []byte, ttl time.Duration, msg string, au *auditCall) (int64, error) {
	if err := b.awaitAcquire(ctx, token); err != nil {
		return 0, err
	}
	keys := []string{k.Lock(), k.Notify(), result}
	if b.info {
		keys = append(keys, k.Holders())
	}
	return b.runOnceScript(ctx, luascripts.OnceStore, luascripts.OnceStoreSrc, keys, true, au,
		token, out, ms(ttl), msg).Int64()
}

// runOnceScript sends s (whose text is src) by EVALSHA, then by EVAL if the
// server lacks it, through the Client's coalescer unless coalescing is off;
// noRetry sends each command once (luascripts.OnceCmd). A call riding a
// shared pipeline may leave it at the end of ctx, as an acquire or release
// does (see leaves). With au, it sends s's audited variant.
func (b *scriptBackend) runOnceScript(ctx context.Context, s *redis.Script, src string, keys []string, noRetry bool, au *auditCall, args ...any) *redis.Cmd {
	if au != nil {
		s, src = luascripts.Audited(s)
		keys, args = luascripts.AuditArgs(keys, args, au.stream, &au.e, nil)
	}
	s, src = b.pub.script(ctx, s, src)
	cmd := b.sendOnceScript(ctx, "evalsha", s.Hash(), keys, noRetry, args)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = b.sendOnceScript(ctx, "eval", src, keys, noRetry, args)
	}
	return cmd
}

func (b *scriptBackend) sendOnceScript(ctx context.Context, verb, script string, keys []string, noRetry bool, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, evalArgs(verb, script, keys, args)...)
	if err := b.processScript(ctx, cmd, keys[0], noRetry, true); err != nil {
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(err)
	}
	return cmd
}
