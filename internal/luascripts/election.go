package luascripts

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The election's scripts (package lock's Election). Its P{K} is a hash of
// the leader's token, value, term and since (election_lib.lua); a term is
// a fence of P{K}:fence. Each script starts with other_kind.lua and
// election_lib.lua; the campaign with fence.lua too.

//go:embed election_lib.lua
var electionLibSrc string

//go:embed election_campaign.lua
var electionCampaignBody string

//go:embed election_resign.lua
var electionResignBody string

//go:embed election_extend.lua
var electionExtendBody string

//go:embed election_proclaim.lua
var electionProclaimBody string

//go:embed election_pttl.lua
var electionPTTLBody string

// The texts of the election's scripts that publish, for callers that
// send their sharded variants (ShardedText).
var (
	ElectionCampaignSrc = fenceSrc + otherKindSrc + electionLibSrc + electionCampaignBody
	ElectionResignSrc   = otherKindSrc + electionLibSrc + electionResignBody
	ElectionProclaimSrc = otherKindSrc + electionLibSrc + electionProclaimBody
)

// ElectionCampaign takes a free election or confirms our term; its reply
// reads like Acquire's ([AcquireReply]), the fence being the term. See
// election_campaign.lua.
var ElectionCampaign = redis.NewScript(ElectionCampaignSrc)

// ElectionResign ends our term and wakes a waiting candidate. Send it once
// (OnceCmd). See election_resign.lua.
var ElectionResign = redis.NewScript(ElectionResignSrc)

// ElectionExtend resets the TTL of our term. See election_extend.lua.
var ElectionExtend = redis.NewScript(otherKindSrc + electionLibSrc + electionExtendBody)

// ElectionProclaim sets the leader's value within our term. See
// election_proclaim.lua.
var ElectionProclaim = redis.NewScript(ElectionProclaimSrc)

// ElectionPTTL reports the time left on our term, with the codes of PTTL.
// See election_pttl.lua.
var ElectionPTTL = redis.NewScript(otherKindSrc + electionLibSrc + electionPTTLBody)

// ElectionExtendAll runs election_extend.lua for every item in one
// pipeline, as [ExtendAll] does extend.lua.
func ElectionExtendAll(ctx context.Context, rdb Pipeliner, items []ExtendItem) []*redis.Cmd {
	calls := make([]Call, len(items))
	for i, it := range items {
		calls[i] = Call{Script: ElectionExtend, Keys: it.Keys.LockKeys(), Args: []any{it.Token, it.TTL.Milliseconds()}}
	}
	return EvalAll(ctx, rdb, calls)
}

// RunOnceText is [RunOnce] for a script whose text the caller gives (a
// sharded variant, say): EVALSHA, then EVAL of src if the server lacks
// it, each command sent once (OnceCmd).
func RunOnceText(ctx context.Context, rdb Processor, s *redis.Script, src string, keys []string, args ...any) *redis.Cmd {
	cmd := runOnce(ctx, rdb, "evalsha", s.Hash(), keys, args)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = runOnce(ctx, rdb, "eval", src, keys, args) // the server did not run it
	}
	return cmd
}
