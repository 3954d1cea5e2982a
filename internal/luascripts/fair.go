package luascripts

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed kind_check.lua
var kindCheckSrc string

//go:embed fair_queue.lua
var fairQueueSrc string

//go:embed fair_acquire.lua
var fairAcquireBody string

//go:embed fair_release.lua
var fairReleaseBody string

//go:embed fair_waiters.lua
var fairWaitersSrc string

// FairAcquireSrc, FairReleaseSrc and FairWaitersSrc are the fair lock's
// scripts, whole.
var (
	FairAcquireSrc = fenceSrc + otherKindSrc + kindCheckSrc + fairQueueSrc + fairAcquireBody
	FairReleaseSrc = fenceSrc + fairQueueSrc + fairReleaseBody
	FairWaitersSrc = fairWaitersSrc
)

// FairAcquire takes a fair lock in arrival order or joins its queue; see
// fair_acquire.lua. Its reply reads like Acquire's ([AcquireReply]).
var FairAcquire = redis.NewScript(FairAcquireSrc)

// FairRelease drops a fair hold, handing the key to the queue's head, or
// takes a waiter out of the queue. Send it once (RunOnceSrc); see
// fair_release.lua.
var FairRelease = redis.NewScript(FairReleaseSrc)

// FairWaiters counts the live entries of a fair lock's queue; see
// fair_waiters.lua.
var FairWaiters = redis.NewScript(FairWaitersSrc)

// Queue is a fair lock's companion P{K}:queue, its waiting tokens in
// arrival order (see fair_queue.lua).
func (k *Keys) Queue() string { return k.Companion("queue") }

// QueueTimes is a fair lock's companion P{K}:qtimes, when each queue
// entry expires (see fair_queue.lua).
func (k *Keys) QueueTimes() string { return k.Companion("qtimes") }

// QueueGone is a fair lock's companion P{K}:qgone, the tokens of waiters
// that left, refused for a while (see fair_queue.lua).
func (k *Keys) QueueGone() string { return k.Companion("qgone") }

// RunOnceSrc runs s, whose text is src, like [RunOnce]: EVALSHA, then EVAL
// if the server lacks the script, each command sent once. For scripts not
// in All.
func RunOnceSrc(ctx context.Context, rdb Processor, s *redis.Script, src string, keys []string, args ...any) *redis.Cmd {
	cmd := runOnce(ctx, rdb, "evalsha", s.Hash(), keys, args)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = runOnce(ctx, rdb, "eval", src, keys, args)
	}
	return cmd
}
