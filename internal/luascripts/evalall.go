package luascripts

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Call is one script call of a pipelined batch (EvalAll, EvalAllOnce).
type Call struct {
	Script *redis.Script // the script, sent by its SHA
	Src    string        // its text: needed by EvalAllOnce's EVAL replay only
	Keys   []string      // KEYS
	Args   []any         // ARGV
}

// EvalAll sends every call by EVALSHA in one pipeline on rdb (go-redis
// splits it per node on a cluster), then replays by EVAL, in a second
// pipeline, those that met NOSCRIPT. It returns one command per call,
// carrying its reply or its error. The calls must be safe to resend
// (go-redis may retry a pipeline): renewals, not releases.
func EvalAll(ctx context.Context, rdb Pipeliner, calls []Call) []*redis.Cmd {
	return evalAll(ctx, rdb, calls, false)
}

// EvalAllOnce is EvalAll for calls that must not run twice, such as
// releases: every command is an OnceCmd, which go-redis never resends.
// Each call must carry its script's Src.
func EvalAllOnce(ctx context.Context, rdb Pipeliner, calls []Call) []*redis.Cmd {
	return evalAll(ctx, rdb, calls, true)
}

func evalAll(ctx context.Context, rdb Pipeliner, calls []Call, once bool) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	run := func(eval bool, which []int) {
		pipe := rdb.Pipeline()
		for _, i := range which {
			c := calls[i]
			if !once {
				if eval {
					cmds[i] = c.Script.Eval(ctx, pipe, c.Keys, c.Args...)
				} else {
					cmds[i] = c.Script.EvalSha(ctx, pipe, c.Keys, c.Args...)
				}
				continue
			}
			a := make([]any, 0, 3+len(c.Keys)+len(c.Args))
			if eval {
				a = append(a, "eval", c.Src)
			} else {
				a = append(a, "evalsha", c.Script.Hash())
			}
			a = append(a, len(c.Keys))
			for _, k := range c.Keys {
				a = append(a, k)
			}
			cmds[i] = redis.NewCmd(ctx, append(a, c.Args...)...)
			_ = pipe.Process(ctx, &OnceCmd{Cmder: cmds[i]})
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
