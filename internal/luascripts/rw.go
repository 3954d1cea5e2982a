package luascripts

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed rw.lua
var rwSrc string

// infoSrc is info.lua: the holder info of the kinds with many holds on one
// key (read-write lock, semaphore), in front of their scripts.
//
//go:embed info.lua
var infoSrc string

//go:embed rw_acquire.lua
var rwAcquireBody string

//go:embed rw_release.lua
var rwReleaseBody string

//go:embed rw_extend.lua
var rwExtendBody string

//go:embed rw_pttl.lua
var rwPTTLBody string

// The read-write lock's scripts start with fence.lua (the acquire), then
// info.lua and rw.lua, which they share.
var (
	rwAcquireSrc = fenceSrc + infoSrc + rwSrc + rwAcquireBody
	rwReleaseSrc = infoSrc + rwSrc + rwReleaseBody
	rwExtendSrc  = infoSrc + rwSrc + rwExtendBody
	rwPTTLSrc    = infoSrc + rwSrc + rwPTTLBody
)

// RWAcquire takes a read or write hold of a read-write lock, or confirms
// one we have; a writer that must wait marks itself waiting. Its reply
// reads like Acquire's ([AcquireReply]); an error reply "KIND <kind>" names
// another kind of lock held at the key. See rw_acquire.lua.
var RWAcquire = redis.NewScript(rwAcquireSrc)

// RWRelease drops our hold of a read-write lock, and wakes every waiter
// when it was the last. Send it once: see rw_release.lua.
var RWRelease = redis.NewScript(rwReleaseSrc)

// RWExtend resets the TTL of our hold of a read-write lock: Extend and
// renewal. See rw_extend.lua.
var RWExtend = redis.NewScript(rwExtendSrc)

// RWPTTL reports the time left on our hold of a read-write lock. See
// rw_pttl.lua.
var RWPTTL = redis.NewScript(rwPTTLSrc)

// RWAll lists the read-write lock's scripts, and RWSources their text in
// the same order, for callers that build their own EVAL commands.
var (
	RWAll     = []*redis.Script{RWAcquire, RWRelease, RWExtend, RWPTTL}
	RWSources = []string{rwAcquireSrc, rwReleaseSrc, rwExtendSrc, rwPTTLSrc}
)

// RWWaiting is the name of the companion (Keys.Companion) that marks a
// writer waiting for a read-write lock: P{K}:writer.
const RWWaiting = "writer"
