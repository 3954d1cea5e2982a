// Package luascripts holds the Lua scripts the lock runs inside Redis. Each
// script is a real .lua file, embedded here and wrapped once, so that it is
// sent by SHA (EVALSHA) with a fallback to EVAL when the server lacks it.
//
// Every key a script touches arrives in KEYS and shares the lock's {K} hash
// tag, so a script never crosses a cluster slot. Replies are integers or
// arrays of integers, never nil.
//
// Acquire, Extend and PTTL give the same outcome when run twice with the
// same arguments (a retry or a resent command). Release and Handoff do not:
// a second run finds the hold already gone and says so, and must be sent
// only once.
package luascripts

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed acquire.lua
var acquireSrc string

//go:embed release.lua
var releaseSrc string

//go:embed extend.lua
var extendSrc string

//go:embed pttl.lua
var pttlSrc string

//go:embed handoff.lua
var handoffSrc string

// Acquire takes a free lock or confirms one we hold. See acquire.lua.
var Acquire = redis.NewScript(acquireSrc)

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
