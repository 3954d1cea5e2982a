package luascripts

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The rate limiter's scripts (package lock's Limiter): GCRA on the server's
// clock (TIME), so that hosts whose clocks disagree share one budget. Its
// keys, for the caller's key K and prefix P: P{K} a hash (field "tat"),
// P{K}:res the reservations that may still give units back, P{K}:done the
// ids settled lately; all expire once the bucket is full again. See
// limiter_lib.lua.

//go:embed limiter_lib.lua
var limiterLibSrc string

//go:embed limiter_take.lua
var limiterTakeBody string

//go:embed limiter_settle.lua
var limiterSettleBody string

//go:embed limiter_when.lua
var limiterWhenBody string

//go:embed limiter_available.lua
var limiterAvailableBody string

// limiterSrc is what every limiter script starts with.
var limiterSrc = otherKindSrc + limiterLibSrc

// LimiterTake takes units from one limiter or several at once, all or
// none, now (allow) or queued (reserve). See limiter_take.lua.
var LimiterTake = redis.NewScript(limiterSrc + limiterTakeBody)

// LimiterSettleSrc is LimiterSettle's text, for its sharded variant
// (Sharded).
var LimiterSettleSrc = limiterSrc + limiterSettleBody

// LimiterSettle settles a reservation: gives back the units it did not
// use, or takes those it used beyond it, once per id. See
// limiter_settle.lua.
var LimiterSettle = redis.NewScript(LimiterSettleSrc)

// LimiterWhen reports how long until reservations are due. See
// limiter_when.lua.
var LimiterWhen = redis.NewScript(limiterSrc + limiterWhenBody)

// LimiterAvailable reports a limiter's free units and state. See
// limiter_available.lua.
var LimiterAvailable = redis.NewScript(limiterSrc + limiterAvailableBody)
