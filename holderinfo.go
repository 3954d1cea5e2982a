package lock

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
)

// Holder info ([WithHolderInfo]): each hold writes, in its acquire's
// round trip, who holds it — owner, fence, host, pid, when, and the text of [WithMetadata] — to
// the lock's companion hash P{K}:holders (field: the hold's token), which
// expires with the hold and goes with its release. [Client.Inspect] and
// [Client.List] read it. ReleaseWatch holds write none.
//
// Every kind writes it: a mutex hold (acquire.lua, handoff.lua), the hold
// under which [Client.Once] runs fn (once_acquire.lua; once_store.lua
// deletes it with the lock), each reader and writer of an [RWLock]
// (rw_*.lua) and each permit of a [Semaphore] (sem_*.lua). The holds of those two expire one by one, and
// Redis 7.0 has no expiry per hash field, so their hash's TTL is kept at
// the longest live hold's (internal/luascripts/info.lua): it never outlives
// the last hold, and a crashed holder's field, which Inspect does not show,
// goes when a script walking the holds finds it expired (or, when a holder
// writing no info dropped the hold, at the next release writing info), or
// with the hash.

// infoSep separates the fields of a holder's info (ASCII unit separator).
const infoSep = "\x1f"

// WithMetadata stores s with each hold of every kind — a mutex's, [Client.Once]'s,
// each reader's and writer's of an [RWLock], each permit of a [Semaphore] — as
// free text for operators (a request or trace id): [Client.Inspect] shows
// it as [Holder].Metadata, byte for byte. It is written in the acquire's
// round trip and expires with the hold. A non-empty s turns holder info on
// unless [WithHolderInfo](false) says otherwise. Default "". Fair locks
// ([WithFair]) and multi-locks write no holder info: a non-empty s given
// to them is [ErrInvalid], and set on the Client they ignore it.
func WithMetadata(s string) Option { return func(c *config) { c.metadata = s; c.given |= optMetadata } }

// WithHolderInfo sets whether each hold records who holds it (owner,
// fence, host, pid, acquired-at, [WithMetadata]) for [Client.Inspect] and
// [Client.List], in its acquire's script: every kind's hold — a mutex's
// ([Client.Once]'s too), each reader and writer of an [RWLock], each permit of a [Semaphore]. It
// goes with the hold's release, with [Client.ForceRelease] and
// [admin.Admin.ForceReleaseToken], and with its expiry. Default off (on when
// [WithMetadata] is given): measured in bench S1 it adds about a fifth to
// an uncontended acquire+release's p50 and server CPU (docs/benchmarks.md); off,
// the scripts do no more than without it. Off, Inspect still shows each
// holder's token and TTL, and the key's fence. ReleaseWatch writes no
// holder info. Fair locks ([WithFair]) and multi-locks write none either:
// WithHolderInfo(true) given to them is [ErrInvalid], and set on the
// Client they ignore it.
func WithHolderInfo(on bool) Option {
	return func(c *config) { c.infoSet, c.infoOn = true, on; c.given |= optHolderInfo }
}

// process is this process's host name and pid, read once.
var process = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil {
		host = ""
	}
	return host + infoSep + strconv.Itoa(os.Getpid())
})

// processHostPID returns this process's host name and pid.
func processHostPID() (host, pid string) {
	host, pid, _ = strings.Cut(process(), infoSep)
	return host, pid
}

// holderInfo returns the info the holds of cfg write, "owner US host US
// pid US metadata", boxed once; nil when they write none.
func holderInfo(cfg *config) any {
	on := cfg.infoOn || (!cfg.infoSet && cfg.metadata != "")
	if !on || cfg.mode != ReleaseScript {
		return nil
	}
	return cfg.owner + infoSep + process() + infoSep + cfg.metadata
}

// forceChannel names the channel on which every Client hears the
// force-releases of locks under prefix (lease.Policy.Inbox): the prefix
// and "force". "" on a Ring, whose shards pass no messages between them:
// a force-release there reaches the holder at its next renewal.
func (c *Client) forceChannel(prefix string) string {
	if _, ok := c.rdb.(*redis.Ring); ok {
		return ""
	}
	return prefix + "force"
}

// releaseKeys are the KEYS of a release by b.
func (b *scriptBackend) releaseKeys(k *keys) []string {
	if b.info {
		return k.InfoReleaseKeys()
	}
	return k.ReleaseKeys()
}

// mutexExtendKeys are the KEYS of a mutex's extend by b, and its ARGV[4]
// (luascripts.ExtendKeys).
func (b *scriptBackend) mutexExtendKeys(k *keys) ([]string, any) {
	return luascripts.ExtendKeys(k, b.info, b.keepsFence())
}

// keepsFence reports whether b's renewals keep the fence counter alive
// with the hold: a fencing mutex hold without holder info (a re-entrant
// hold keeps its fence in its hash; holder info records it).
func (b *scriptBackend) keepsFence() bool { return b.fencing && !b.reentrant && !b.info }

// extendKeys are the KEYS of an extend by b.
func (b *scriptBackend) extendKeys(k *keys) []string {
	if b.info {
		return k.InfoLockKeys()
	}
	return k.LockKeys()
}
