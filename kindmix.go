package lock

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Every kind of lock keeps its primary state at P{K}, so two kinds on one
// key collide there. A script that finds another kind at P{K} replies with
// the error "KIND <kind>" (see internal/luascripts/other_kind.lua); the
// kind's Go side turns it into an error wrapping ErrInvalid that names
// both kinds.

// kindNames are the words of a KIND reply, as an error says them.
var kindNames = map[string]string{
	"mutex":     "mutex",
	"rwlock":    "read-write lock",
	"semaphore": "semaphore",
	"election":  "election",
	"limiter":   "rate limiter",
}

// mixedKind returns err, or, for a KIND reply, an error wrapping
// ErrInvalid: `key "k" is a semaphore, not a mutex`, want being the kind
// of the caller.
func mixedKind(key string, err error, want string) error {
	if err == nil || !redis.HasErrorPrefix(err, "KIND") {
		return err
	}
	return kindError(key, strings.TrimSpace(strings.TrimPrefix(err.Error(), "KIND")), want)
}

// kindReply is mixedKind for callers that handle other errors
// themselves: nil unless err is a KIND reply.
func kindReply(key string, err error, want string) error {
	if !redis.HasErrorPrefix(err, "KIND") {
		return nil
	}
	return mixedKind(key, err, want)
}

// kindError is the error of a want on key found holding the kind have (a
// word of a KIND reply).
func kindError(key, have, want string) error {
	if name, ok := kindNames[have]; ok {
		have = name
	} else {
		have = "Redis " + have + " value"
	}
	return invalidf("key %q is %s, not %s", key, withArticle(have), withArticle(want))
}

// withArticle returns "a s", or "an s" when s starts with a vowel.
func withArticle(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// otherKind returns, for a key whose value the script-free mutex could not
// read (WRONGTYPE), the error naming the kind found there, or nil when it
// is a mutex after all (someone's re-entrant hold) or the kind cannot be
// read: the same rule as other_kind.lua, in one transaction, on the
// contended path only.
func otherKind(ctx context.Context, rdb redis.UniversalClient, k *keys) error {
	var (
		typ         *redis.StatusCmd
		empty, mode *redis.BoolCmd
	)
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		typ = p.Type(ctx, k.Lock())
		empty = p.HExists(ctx, k.Lock(), "")
		mode = p.HExists(ctx, k.Lock(), "mode")
		return nil
	})
	kind := "mutex"
	switch t := typ.Val(); {
	case err != nil && typ.Err() != nil:
		return nil // not told (an ACL may deny TYPE): contention, as before
	case t == "zset":
		kind = "semaphore"
	case t == "hash" && !empty.Val() && mode.Val():
		kind = "rwlock"
	}
	if kind == "mutex" {
		return nil
	}
	return kindError(k.User, kind, "mutex")
}
