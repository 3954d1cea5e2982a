package locktest

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
)

// gate is a go-redis hook on the client under test that holds back, while
// paused, every command that resets a lock's TTL: a run of extend.lua (the
// renewal loop's pipelines and Extend, by SHA or by source), or, without
// scripting (ReleaseWatch), a PEXPIRE of a lock's primary key. It tells
// these apart by what they run, not by the path they take, so pipelines,
// the coalescer and transactions are all covered. A held call continues on
// resume, or fails with its context's cause when its context ends first
// (the renewal loop's calls carry a deadline just before the hold's safety
// deadline).
type gate struct {
	mu     sync.Mutex
	paused chan struct{} // non-nil while paused; closed on resume
}

var _ redis.Hook = (*gate)(nil)

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused == nil {
		g.paused = make(chan struct{})
	}
}

func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused != nil {
		close(g.paused)
		g.paused = nil
	}
}

// wait blocks while the gate is paused, until resume or the end of ctx.
func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.paused
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if resetsTTL(cmd) {
			if err := g.wait(ctx); err != nil {
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if !resetsTTL(cmd) {
				continue
			}
			if err := g.wait(ctx); err != nil {
				for _, c := range cmds {
					c.SetErr(err)
				}
				return err
			}
			break
		}
		return next(ctx, cmds)
	}
}

// extendSrc is extend.lua's text, which an EVAL carries.
var extendSrc = func() string {
	for i, s := range luascripts.All {
		if s == luascripts.Extend {
			return luascripts.Sources[i]
		}
	}
	panic("locktest: extend.lua missing from luascripts.All")
}()

// resetsTTL reports a command that resets a held lock's TTL.
func resetsTTL(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	switch strings.ToLower(cmd.Name()) {
	case "evalsha":
		return args[1] == luascripts.Extend.Hash()
	case "eval":
		return args[1] == extendSrc
	case "pexpire":
		k, ok := args[1].(string)
		return ok && lockKey(k)
	}
	return false
}

// lockKey reports a lock's primary key, P{K}: the prefix holds no brace,
// and companions end in ":name".
func lockKey(k string) bool {
	return strings.IndexByte(k, '{') >= 0 && strings.HasSuffix(k, "}")
}
