package lock_test

import (
	"context"
	"io"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// dropReplies is a go-redis hook that lets the first drop script calls
// (EVAL or EVALSHA) that succeed reach Redis, then reports them failed as a
// lost reply would.
type dropReplies struct {
	drop    int32
	dropped atomic.Int32
}

func (h *dropReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *dropReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		name := strings.ToLower(cmd.Name())
		if err == nil && (name == "eval" || name == "evalsha") && h.dropped.Load() < h.drop {
			h.dropped.Add(1)
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return err
	}
}

func (h *dropReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// roundTrips is a go-redis hook counting round trips: one per command sent
// alone, one per pipeline (or MULTI/EXEC block).
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}
