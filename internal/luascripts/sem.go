package luascripts

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The semaphore's scripts (package lock's Semaphore). Its P{K} is a sorted
// set: member a permit's token, score the permit's expiry in milliseconds
// on the server's clock (TIME), so no client's clock decides when a permit
// ends. Every script that may find another kind of lock at P{K} starts
// with other_kind.lua.

//go:embed other_kind.lua
var otherKindSrc string

//go:embed sem_acquire.lua
var semAcquireBody string

//go:embed sem_release.lua
var semReleaseBody string

//go:embed sem_extend.lua
var semExtendBody string

//go:embed sem_pttl.lua
var semPTTLBody string

//go:embed sem_available.lua
var semAvailableBody string

// Those that write take info.lua (holder info) after other_kind.lua.
var (
	semAcquireSrc = fenceSrc + otherKindSrc + infoSrc + semAcquireBody
	semReleaseSrc = otherKindSrc + infoSrc + semReleaseBody
	semExtendSrc  = otherKindSrc + infoSrc + semExtendBody
	semPTTLSrc    = otherKindSrc + semPTTLBody
)

// SemAcquire takes a permit if fewer than n are out, or confirms ours; its
// reply reads like Acquire's ([AcquireReply]). See sem_acquire.lua.
var SemAcquire = redis.NewScript(semAcquireSrc)

// SemRelease gives a permit back and wakes waiters. Send it once
// (OnceCmd). See sem_release.lua.
var SemRelease = redis.NewScript(semReleaseSrc)

// SemExtend resets a live permit's expiry. See sem_extend.lua.
var SemExtend = redis.NewScript(semExtendSrc)

// SemPTTL reports the time left on a live permit, with the codes of PTTL.
// See sem_pttl.lua.
var SemPTTL = redis.NewScript(semPTTLSrc)

// SemAvailable counts the free permits. See sem_available.lua.
var SemAvailable = redis.NewScript(otherKindSrc + semAvailableBody)

// SemExtendAll runs sem_extend.lua for every item in one pipeline, as
// [ExtendAll] does extend.lua (with the holder-info hash for an item with
// Holders).
func SemExtendAll(ctx context.Context, rdb Pipeliner, items []ExtendItem) []*redis.Cmd {
	calls := make([]Call, len(items))
	for i, it := range items {
		keys := it.Keys.LockKeys()
		if it.Holders {
			keys = it.Keys.InfoLockKeys()
		}
		calls[i] = Call{Script: SemExtend, Keys: keys, Args: []any{it.Token, it.TTL.Milliseconds()}}
	}
	return EvalAll(ctx, rdb, calls)
}

//go:embed sem_handoff.lua
var semHandoffBody string

var semHandoffSrc = fenceSrc + otherKindSrc + infoSrc + semHandoffBody

// SemHandoff passes a permit to a waiting token in one step. Send it once
// (OnceCmd). See sem_handoff.lua.
var SemHandoff = redis.NewScript(semHandoffSrc)

// SemAll lists the semaphore's scripts that are sent one at a time, and
// SemSources their texts, in the same order, for callers that build their
// own EVAL commands (as Sources for All).
var (
	SemAll     = []*redis.Script{SemAcquire, SemRelease, SemExtend, SemPTTL, SemHandoff}
	SemSources = []string{semAcquireSrc, semReleaseSrc, semExtendSrc, semPTTLSrc, semHandoffSrc}
)
