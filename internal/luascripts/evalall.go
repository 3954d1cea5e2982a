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
	return evalAll(ctx, rdb, len(calls), func(i int) Call { return calls[i] }, false)
}

// EvalAllOnce is EvalAll for calls that must not run twice, such as
// releases: every command is an OnceCmd, which go-redis never resends.
// Each call must carry its script's Src.
func EvalAllOnce(ctx context.Context, rdb Pipeliner, calls []Call) []*redis.Cmd {
	return evalAll(ctx, rdb, len(calls), func(i int) Call { return calls[i] }, true)
}

// evalAll sends n calls, call(i) making the i-th: its Args may be reused by
// the next call(j), as each is copied into its command at once.
func evalAll(ctx context.Context, rdb Pipeliner, n int, call func(i int) Call, once bool) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	run := func(eval bool, which []int) {
		pipe := rdb.Pipeline()
		if !once && !eval {
			sendAll(ctx, pipe, call, which, cmds)
			_, _ = pipe.Exec(ctx) // per-command errors are read by the caller
			return
		}
		for _, i := range which {
			c := call(i)
			if !once {
				cmds[i] = c.Script.Eval(ctx, pipe, c.Keys, c.Args...)
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
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	run(false, all)
	var missing []int
	for i, cmd := range cmds {
		// HasErrorPrefix allocates: ask it only about errors.
		if cmd.Err() != nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		run(true, missing)
	}
	return cmds
}

// sendAll queues the calls of which on pipe by EVALSHA, as Script.EvalSha
// would, with two allocations fewer per call: their commands' arguments
// share one array (or a few, when calls differ in size), and a script's SHA
// is boxed once for a run of calls of the same script.
func sendAll(ctx context.Context, pipe redis.Pipeliner, call func(i int) Call, which []int, cmds []*redis.Cmd) {
	var argv []any
	var script *redis.Script
	var sha any
	for k, i := range which {
		c := call(i)
		if c.Script != script {
			script, sha = c.Script, c.Script.Hash()
		}
		if need := 3 + len(c.Keys) + len(c.Args); cap(argv)-len(argv) < need {
			// Room for the rest, if they are the size of this one; the
			// commands made so far keep the array they use.
			argv = make([]any, 0, need*(len(which)-k))
		}
		start := len(argv)
		argv = append(argv, "evalsha", sha, len(c.Keys))
		for _, k := range c.Keys {
			argv = append(argv, k)
		}
		argv = append(argv, c.Args...)
		cmd := redis.NewCmd(ctx, argv[start:len(argv):len(argv)]...)
		if len(c.Keys) > 0 {
			cmd.SetFirstKeyPos(3)
		}
		_ = pipe.Process(ctx, cmd) // the error is in the command
		cmds[i] = cmd
	}
}
