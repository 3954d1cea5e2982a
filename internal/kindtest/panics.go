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
	Armed atomic.Bool
	Match func(cmds []redis.Cmder) bool
	Dial  bool
}

// AnyScript reports whether cmds hold a script call (EVAL or EVALSHA).
func AnyScript(cmds []redis.Cmder) bool {
	return slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return ScriptKeys(c) != nil })
}

func (h *PanicWhen) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h.Dial && h.Armed.Swap(false) {
			panic("hook panicked")
		}
		return next(ctx, network, addr)
	}
}

func (h *PanicWhen) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.check([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

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

// SyncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
