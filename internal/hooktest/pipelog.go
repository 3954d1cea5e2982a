package hooktest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// PipeLog is a go-redis hook that records, for each pipeline carrying
// EVALSHA calls, the first key of each, and changes nothing. A new
// connection's handshake (also a pipeline) and EVAL replays after NOSCRIPT
// are not recorded.
type PipeLog struct {
	mu   sync.Mutex
	keys [][]string
}

// Keys returns the first key of each EVALSHA, by pipeline, in order.
func (p *PipeLog) Keys() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([][]string, len(p.keys))
	for i, k := range p.keys {
		out[i] = append([]string(nil), k...)
	}
	return out
}

// Sizes returns the number of EVALSHA calls of each pipeline, in order.
func (p *PipeLog) Sizes() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, len(p.keys))
	for i, k := range p.keys {
		out[i] = len(k)
	}
	return out
}

// DialHook lets dials through.
func (p *PipeLog) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook lets commands sent alone through.
func (p *PipeLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook records the pipeline's EVALSHA keys.
func (p *PipeLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var keys []string
		for _, c := range cmds {
			if a := c.Args(); strings.ToLower(c.Name()) == "evalsha" && len(a) > 3 {
				keys = append(keys, fmt.Sprint(a[3]))
			}
		}
		if len(keys) > 0 {
			p.mu.Lock()
			p.keys = append(p.keys, keys)
			p.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}
