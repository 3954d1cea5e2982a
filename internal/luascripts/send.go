package luascripts

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// OnceCmd is a command go-redis must not resend after a connection error,
// nor any pipeline that carries it: a release or a handoff (by script or in
// a transaction). Run twice, such a command finds the hold already gone:
// it would report our own release as a loss, and a re-entrant release would
// find nothing to drop (see release.lua). Sent once, a call whose reply is
// lost has an unknown outcome, which its caller reports as an error.
//
// The other calls — acquire, extend, renewal, TTL — give the same outcome
// when resent with the same token, so they keep go-redis's retries.
//
// It wraps any command (an EVAL's *redis.Cmd, the core's *redis.IntCmd, a
// DEL inside a transaction); its sender keeps the typed command to read the
// reply.
type OnceCmd struct {
	redis.Cmder
	// Room for a release's arguments ("evalsha", sha, 2, two keys, token,
	// flag), so that the wrapper costs no allocation of its own.
	Argv [7]any
}

// NoRetry tells go-redis not to resend the command.
func (*OnceCmd) NoRetry() bool { return true }

// Processor sends one command: a *redis.Client, a cluster client, a
// pipeline.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Pipeliner makes pipelines: a *redis.Client, a cluster client.
type Pipeliner interface {
	Pipeline() redis.Pipeliner
}

// ExtendItem is one hold a pipelined renewal extends.
type ExtendItem struct {
	Keys  *Keys
	Token string // the token, or a re-entrant hold's id
	TTL   time.Duration
}

// ExtendAll runs extend.lua for every item in one pipeline on rdb (go-redis
// splits it per node on a cluster), then replays by EVAL, in a second
// pipeline, those that met NOSCRIPT. It returns one command per item,
// carrying its reply (see extend.lua) or its error.
func ExtendAll(ctx context.Context, rdb Pipeliner, items []ExtendItem, reentrant bool) []*redis.Cmd {
	flag := "0"
	if reentrant {
		flag = "1"
	}
	cmds := make([]*redis.Cmd, len(items))
	run := func(eval bool, which []int) {
		pipe := rdb.Pipeline()
		for _, i := range which {
			it := items[i]
			args := []any{it.Token, it.TTL.Milliseconds(), flag}
			if eval {
				cmds[i] = Extend.Eval(ctx, pipe, it.Keys.LockKeys(), args...)
			} else {
				cmds[i] = Extend.EvalSha(ctx, pipe, it.Keys.LockKeys(), args...)
			}
		}
		_, _ = pipe.Exec(ctx) // per-command errors are read by the caller
	}
	all := make([]int, len(items))
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
