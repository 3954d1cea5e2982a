package luascripts

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed fence_raise.lua
var fenceRaiseBody string

var fenceRaiseSrc = fenceSrc + fenceRaiseBody

// FenceRaise lifts a node's fencing counter to at least a given fence while
// the lock still holds the caller's token; redlock uses it so that a quorum
// of nodes holds the fence it hands out. See fence_raise.lua.
var FenceRaise = redis.NewScript(fenceRaiseSrc)
