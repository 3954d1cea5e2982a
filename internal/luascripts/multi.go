package luascripts

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed multi_acquire.lua
var multiAcquireBody string

//go:embed multi_release.lua
var multiReleaseSrc string

//go:embed multi_extend.lua
var multiExtendSrc string

// The multi-lock's scripts, whole.
var (
	MultiAcquireSrc = fenceSrc + kindCheckSrc + multiAcquireBody
	MultiReleaseSrc = multiReleaseSrc
	MultiExtendSrc  = multiExtendSrc
)

// MultiAcquire takes every lock of one slot group or none; see
// multi_acquire.lua.
var MultiAcquire = redis.NewScript(MultiAcquireSrc)

// MultiRelease drops every lock of one slot group still ours. Send it once
// (EvalAll with once); see multi_release.lua.
var MultiRelease = redis.NewScript(MultiReleaseSrc)

// MultiExtend resets the TTL of every lock of one slot group if all are
// ours; see multi_extend.lua.
var MultiExtend = redis.NewScript(MultiExtendSrc)

// Call is one script call of EvalAll.
type Call struct {
	Keys []string
	Args []any
}

// EvalAll runs s (whose text is src) once per call in one pipeline on rdb
// (go-redis splits it per node on a cluster), then replays by EVAL, in a
// second pipeline, the calls that met NOSCRIPT. With once, every command
// is an OnceCmd: go-redis never resends it. It returns one command per
// call, carrying its reply or its error.
func EvalAll(ctx context.Context, rdb Pipeliner, s *redis.Script, src string, once bool, calls []Call) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	run := func(eval bool, which []int) {
		pipe := rdb.Pipeline()
		for _, i := range which {
			c := calls[i]
			a := make([]any, 0, 3+len(c.Keys)+len(c.Args))
			if eval {
				a = append(a, "eval", src)
			} else {
				a = append(a, "evalsha", s.Hash())
			}
			a = append(a, len(c.Keys))
			for _, k := range c.Keys {
				a = append(a, k)
			}
			cmds[i] = redis.NewCmd(ctx, append(a, c.Args...)...)
			var cmd redis.Cmder = cmds[i]
			if once {
				cmd = &OnceCmd{Cmder: cmds[i]}
			}
			_ = pipe.Process(ctx, cmd)
		}
		_, _ = pipe.Exec(ctx) // per-command errors are read by the caller
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	run(false, all)
	var missing []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		run(true, missing)
	}
	return cmds
}
