package lock

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
)

// evalArgs returns the arguments of verb (EVALSHA or EVAL) running script
// over keys with args.
func evalArgs(verb, script string, keys []string, args []any) []any {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, verb, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	return append(a, args...)
}

// processScript sends c, marked as sent at most once when once, straight
// to Redis or, with coalescing, through the lane of key (leave as for
// coalescer.do). The error is the coalescer's; a call sent straight has
// its error in c.
func (b *scriptBackend) processScript(ctx context.Context, c redis.Cmder, key string, once, leave bool) error {
	if once {
		c = &luascripts.OnceCmd{Cmder: c}
	}
	if b.co == nil {
		_ = b.rdb.Process(ctx, c)
		return nil
	}
	return b.co.lane(ctx, key).do(ctx, c, leave)
}
