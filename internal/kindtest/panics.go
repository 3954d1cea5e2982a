package kindtest

import (
	"bytes"
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// PanicWhen is a go-redis hook that, while Armed, panics with "hook
// panicked", as a user's broken hook would: in every call and pipeline
// whose commands Match (nil: none) reports true of, and, with Dial, in the
// next dial, which disarms it.
type PanicWhen struct {
	// Armed switches the panics on.
	Armed atomic.Bool
	// Match picks the calls and pipelines that panic; nil: none.
	Match func(cmds []redis.Cmder) bool
	// Dial makes the next dial panic while armed, and disarms.
	Dial bool
}

// AnyScript reports whether cmds hold a script call (EVAL or EVALSHA).
func AnyScript(cmds []redis.Cmder) bool {
	return slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return ScriptKeys(c) != nil })
}

// DialHook panics in a dial when Dial is set and h is armed, once.
func (h *PanicWhen) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h.Dial && h.Armed.Swap(false) {
			panic("hook panicked")
		}
		return next(ctx, network, addr)
	}
}

// ProcessHook panics in a call that Match picks while h is armed.
func (h *PanicWhen) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.check([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook panics in a pipeline that Match picks while h is
// armed.
func (h *PanicWhen) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.check(cmds)
		return next(ctx, cmds)
	}
}

func (h *PanicWhen) check(cmds []redis.Cmder) {
	if h.Match != nil && h.Armed.Load() && h.Match(cmds) {
		panic("hook panicked")
	}
}

// FailWhen is a go-redis hook that fails, without sending them, the calls
// and pipelines whose commands Match reports true of, each command with
// Err, as a connection lost before the write would (Err io.EOF) or a
// caller's ctx ending as it sends (context.Canceled). Match may have side
// effects: it is asked once per call or pipeline, before anything is sent.
type FailWhen struct {
	// Match picks the calls and pipelines that fail.
	Match func(cmds []redis.Cmder) bool
	// Err is the error each failed command gets.
	Err error
}

// DialHook lets dials through unchanged.
func (*FailWhen) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook fails a call that Match picks.
func (h *FailWhen) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.Match([]redis.Cmder{cmd}) {
			cmd.SetErr(h.Err)
			return h.Err
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook fails a pipeline that Match picks, every command of
// it.
func (h *FailWhen) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.Match(cmds) {
			for _, c := range cmds {
				c.SetErr(h.Err)
			}
			return h.Err
		}
		return next(ctx, cmds)
	}
}

// SyncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
