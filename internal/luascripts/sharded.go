package luascripts

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// publishing lists every script that publishes on a notify channel, with
// its text. Each gets a sharded variant (SPUBLISH in place of PUBLISH),
// sent instead on a Redis Cluster whose servers all run Redis 7.0 or later,
// where waiters listen with SSUBSCRIBE. A test fails when a .lua file that
// publishes is missing here.
// classicOnly: forcerelease.lua is left out. Besides the key's channel it
// publishes on the Client's per-prefix inbox, which lies in no key's slot
// and so cannot take SPUBLISH; its holder hears it there, classically, and
// on a sharded cluster the key's waiters wake by their backoff instead.
var publishing = []struct {
	s   *redis.Script
	src string
}{
	{Release, releaseSrc},
	{OnceStore, OnceStoreSrc},
	{RWRelease, rwReleaseSrc},
	{SemRelease, semReleaseSrc},
	{SemHandoff, semHandoffSrc},
	{FairRelease, FairReleaseSrc},
	{MultiRelease, MultiReleaseSrc},
	{ElectionCampaign, ElectionCampaignSrc},
	{ElectionResign, ElectionResignSrc},
	{ElectionProclaim, ElectionProclaimSrc},
	{LimiterSettle, LimiterSettleSrc},
}

// classicPublish and shardedPublish are how a script publishes, classic and
// sharded.
const (
	classicPublish = "redis.call('PUBLISH'"
	shardedPublish = "redis.call('SPUBLISH'"
)

// ShardedSource returns src with each PUBLISH made SPUBLISH.
func ShardedSource(src string) string {
	return strings.ReplaceAll(src, classicPublish, shardedPublish)
}

var shardedScripts, shardedTexts = func() (map[*redis.Script]*redis.Script, map[string]string) {
	scripts := make(map[*redis.Script]*redis.Script, len(publishing))
	texts := make(map[string]string, 2*len(publishing))
	for _, p := range publishing {
		src := ShardedSource(p.src)
		v := redis.NewScript(src)
		scripts[p.s] = v
		texts[p.src] = src
		texts[p.s.Hash()] = v.Hash()
	}
	// The audited variants of those (audit.go), likewise.
	for _, p := range publishing {
		if a, ok := audited[p.s]; ok {
			src := ShardedSource(a.src)
			v := redis.NewScript(src)
			scripts[a.s] = v
			texts[a.src] = src
			texts[a.s.Hash()] = v.Hash()
		}
	}
	return scripts, texts
}()

// Sharded returns the sharded variant of s: itself when s does not publish.
func Sharded(s *redis.Script) *redis.Script {
	if v, ok := shardedScripts[s]; ok {
		return v
	}
	return s
}

// ShardedText returns the sharded variant of a script's text or SHA1 (the
// second argument of an EVAL or EVALSHA): itself when its script does not
// publish.
func ShardedText(srcOrSHA string) string {
	if v, ok := shardedTexts[srcOrSHA]; ok {
		return v
	}
	return srcOrSHA
}
