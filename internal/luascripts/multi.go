package luascripts

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed multi_acquire.lua
var multiAcquireBody string

//go:embed multi_release.lua
var multiReleaseSrc string

//go:embed multi_extend.lua
var multiExtendSrc string

// The multi-lock's scripts, whole.
var (
	MultiAcquireSrc = fenceSrc + otherKindSrc + kindCheckSrc + multiAcquireBody
	MultiReleaseSrc = multiReleaseSrc
	MultiExtendSrc  = multiExtendSrc
)

// MultiAcquire takes every lock of one slot group or none; see
// multi_acquire.lua.
var MultiAcquire = redis.NewScript(MultiAcquireSrc)

// MultiRelease drops every lock of one slot group still ours. Send it once
// (EvalAll with once); see multi_release.lua.
var MultiRelease = redis.NewScript(MultiReleaseSrc)

// MultiExtend resets the TTL of every lock of one slot group if all are
// ours; see multi_extend.lua.
var MultiExtend = redis.NewScript(MultiExtendSrc)
