package luascripts

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Call is one script call of a pipelined batch (EvalAll).
type Call struct {
	Script *redis.Script
	Keys   []string
	Args   []any
}

// EvalAll sends every call by EVALSHA in one pipeline on rdb (go-redis
// splits it per node on a cluster), then replays by EVAL, in a second
// pipeline, those that met NOSCRIPT. It returns one command per call,
// carrying its reply or its error. The calls must be safe to resend
// (go-redis may retry a pipeline): renewals, not releases.
func EvalAll(ctx context.Context, rdb Pipeliner, calls []Call) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	run := func(eval bool, which []int) {
		pipe := rdb.Pipeline()
		for _, i := range which {
			c := calls[i]
			if eval {
				cmds[i] = c.Script.Eval(ctx, pipe, c.Keys, c.Args...)
			} else {
				cmds[i] = c.Script.EvalSha(ctx, pipe, c.Keys, c.Args...)
			}
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
