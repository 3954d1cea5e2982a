// Package luascripts holds the Lua scripts the lock runs inside Redis. Each
// script is a real .lua file, embedded here and wrapped once, so that it is
// sent by SHA (EVALSHA) with a fallback to EVAL when the server lacks it.
//
// Every key a script touches arrives in KEYS and shares the lock's {K} hash
// tag, so a script never crosses a cluster slot. Replies are integers, never
// nil.
//
// The scripts that hand out fences (Acquire, Handoff, FenceRaise) start with
// fence.lua, which keeps the fencing counter: it lives [FenceTTL] from its
// creation, or as long as the fencing mutex hold that took its last fence,
// and restarts from the server's clock in microseconds, so that fences
// keep increasing across its expiry. Acquire puts acquire_fast.lua in front
// of it: a free key and a running counter take three or four commands (SET,
// INCR, PTTL, and PEXPIRE when the counter would expire before the hold)
// and no more Lua than that.
//
// Acquire, Extend and PTTL give the same outcome when run twice with the
// same arguments (a retry or a resent command). Release and Handoff do not:
// a second run finds the hold already gone and says so, and must be sent
// only once. Every kind's acquire that finds the hold already ours
// lengthens its TTL to the acquire's and never shortens it, so a copy
// arriving late, after an Extend, leaves the extended hold as it is.
package luascripts

import (
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
)

// FenceTTL is how long a fencing counter lives from its creation (a
// restart from the clock, or a raise by FenceRaise) at least; FENCE_TTL in
// fence.lua.
const FenceTTL = time.Minute

// Clocked is the least value of a counter started from the server's clock
// (CLOCKED in fence.lua): a smaller one was created by INCR and must restart
// from the clock before its value serves as a fence.
const Clocked = 1_000_000_000_000_000

// FenceStartAhead is how far past its server's clock a counter starts
// when it restarts (START_AHEAD in fence.lua).
const FenceStartAhead = 2 * time.Second

//go:embed fence.lua
var fenceSrc string

//go:embed acquire.lua
var acquireBody string

//go:embed acquire_fast.lua
var acquireFastSrc string

var acquireSrc = acquireFastSrc + fenceSrc + otherKindSrc + acquireBody

//go:embed release.lua
var releaseSrc string

//go:embed extend.lua
var extendSrc string

//go:embed pttl.lua
var pttlSrc string

//go:embed handoff.lua
var handoffBody string

var handoffSrc = fenceSrc + handoffBody

// Acquire takes a free lock or confirms one we hold. See acquire.lua; read
// its reply with [AcquireReply].
var Acquire = redis.NewScript(acquireSrc)

// AcquireReply reads Acquire's reply n: whether the lock is ours, then the
// hold's fence (0 without fencing), else the time left on another's hold.
func AcquireReply(n int64) (ours bool, fence int64, left time.Duration) {
	if n >= 0 {
		return true, n, 0
	}
	return false, 0, time.Duration(-1-n) * time.Millisecond
}

// Release deletes a lock still holding the caller's token and publishes on
// the notify channel, or drops one re-entrant hold. Send it once: see the
// package comment and release.lua.
var Release = redis.NewScript(releaseSrc)

// Extend resets the TTL of a lock still holding the caller's token. It serves
// both Extend and the renewal loop. See extend.lua.
var Extend = redis.NewScript(extendSrc)

// PTTL reports the time left on a lock still holding the caller's token.
// See pttl.lua.
var PTTL = redis.NewScript(pttlSrc)

// Handoff passes a hold to a waiting token in one step. Send it once: see
// the package comment and handoff.lua.
var Handoff = redis.NewScript(handoffSrc)

// All lists every script, for loading them ahead of use.
var All = []*redis.Script{Acquire, Release, Extend, PTTL, Handoff}

// Sources holds the text of each script of All, in the same order, for
// callers that build their own EVAL commands.
var Sources = []string{acquireSrc, releaseSrc, extendSrc, pttlSrc, handoffSrc}

//go:embed once_acquire.lua
var onceAcquireHead string

// OnceAcquireSrc is the text of OnceAcquire, for callers that build their
// own EVAL commands.
var OnceAcquireSrc = fenceSrc + otherKindSrc + onceAcquireHead + acquireBody

// OnceAcquire returns a Once's stored result, or else makes Acquire's
// attempt (same keys and arguments, the result key appended to KEYS). See
// once_acquire.lua.
var OnceAcquire = redis.NewScript(OnceAcquireSrc)

// OnceStoreSrc is the text of OnceStore.
//
//go:embed once_store.lua
var OnceStoreSrc string

// OnceStore stores a Once's outcome and releases its lock in one step, if
// the lock still holds the caller's token, and publishes. Safe to resend
// with the same arguments. See once_store.lua.
var OnceStore = redis.NewScript(OnceStoreSrc)

//go:embed holds.lua
var holdsSrc string

//go:embed inspect.lua
var inspectBody string

//go:embed forcerelease.lua
var forceReleaseBody string

// Inspect reads a lock of any kind: its kind, time left, fence and holders
// with their holder info. See inspect.lua and holds.lua (the table each
// kind fills in) for its reply.
var Inspect = redis.NewScript(holdsSrc + inspectBody)

// ForceRelease frees a lock of any kind, or removes one holder, and tells
// each removed holder's process on the notify channel (lease.MsgForce).
// Send it once: a second run finds the holds gone. See forcerelease.lua.
var ForceRelease = redis.NewScript(forceReleaseSrc)

var forceReleaseSrc = holdsSrc + forceReleaseBody
