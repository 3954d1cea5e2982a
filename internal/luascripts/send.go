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

// RunOnce runs s, one of All, ForceRelease or an audited variant of those (Audited), like Script.Run (EVALSHA, then EVAL if the
// server lacks the script), each command sent once (OnceCmd): for Release
// and Handoff.
func RunOnce(ctx context.Context, rdb Processor, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := runOnce(ctx, rdb, "evalsha", s.Hash(), keys, args)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		// The server did not run it: sending the whole script is safe.
		for i, x := range All {
			if x == s {
				cmd = runOnce(ctx, rdb, "eval", Sources[i], keys, args)
			}
		}
		if s == ForceRelease {
			cmd = runOnce(ctx, rdb, "eval", forceReleaseSrc, keys, args)
		}
		for _, a := range audited {
			if a.s == s {
				cmd = runOnce(ctx, rdb, "eval", a.src, keys, args)
			}
		}
	}
	return cmd
}

func runOnce(ctx context.Context, rdb Processor, verb, script string, keys []string, args []any) *redis.Cmd {
	once := new(OnceCmd)
	a := once.Argv[:0]
	a = append(a, verb, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	cmd := redis.NewCmd(ctx, append(a, args...)...)
	once.Cmder = cmd
	_ = rdb.Process(ctx, once) // the error is in the command
	return cmd
}

// Pipeliner makes pipelines: a *redis.Client, a cluster client.
type Pipeliner interface {
	Pipeline() redis.Pipeliner
}

// ExtendItem is one hold a pipelined renewal extends.
type ExtendItem struct {
	Keys  *Keys         // the lock's keys
	Token string        // the token, or a re-entrant hold's id
	TTL   time.Duration // the TTL to set
	// Holders: the holder-info hash (Keys.Holders) takes the TTL too.
	Holders bool
	// Fence: without Holders, the fence counter (Keys.Fence) of a fencing
	// mutex hold lives at least the TTL too (extend.lua).
	Fence bool
}

// ExtendAll runs extend.lua for every item in one pipeline on rdb (see
// EvalAll). It returns one command per item, carrying its reply (see
// extend.lua) or its error. Each call is made as it is sent, into one
// argument array, and a TTL is boxed once for a run of items with the same
// one: a renewal costs no allocation of ours beyond its token's and its
// keys' boxes.
func ExtendAll(ctx context.Context, rdb Pipeliner, items []ExtendItem, reentrant bool) []*redis.Cmd {
	var args [extendArgs]any
	var ms int64
	var msArg any
	return evalAll(ctx, rdb, len(items), func(i int) Call {
		it := items[i]
		if m := it.TTL.Milliseconds(); msArg == nil || m != ms {
			ms, msArg = m, m
		}
		return extendCall(it, reentrant, msArg, args[:])
	}, false)
}

// extendArgs is the number of extend.lua's ARGV.
const extendArgs = 4

// ExtendCall is the extend.lua call that renews it.
func ExtendCall(it ExtendItem, reentrant bool) Call {
	return extendCall(it, reentrant, it.TTL.Milliseconds(), make([]any, extendArgs))
}

// extendCall is ExtendCall with the TTL in milliseconds already boxed, its
// ARGV written into args.
func extendCall(it ExtendItem, reentrant bool, ms any, args []any) Call {
	var flag any = "0" // constants: boxing them costs nothing
	if reentrant {
		flag = "1"
	}
	keys, counter := ExtendKeys(it.Keys, it.Holders, it.Fence)
	args[0], args[1], args[2], args[3] = it.Token, ms, flag, counter
	return Call{Script: Extend, Keys: keys, Args: args}
}

// ExtendKeys returns the KEYS of an extend.lua call on k, and its ARGV[4]:
// with holder info, {lock, holders}; else, for a fencing mutex hold (not
// re-entrant: its hash keeps its fence), {lock, fence} and "1", so that the
// counter lives as long as the hold; else {lock}.
func ExtendKeys(k *Keys, holders, fence bool) ([]string, any) {
	switch {
	case holders:
		return k.InfoLockKeys(), "0"
	case fence:
		return k.AcquireKeys(), "1"
	}
	return k.LockKeys(), "0"
}
