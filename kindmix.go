package lock

import (
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
}

// mixedKind returns err, or, for a KIND reply, an error wrapping
// ErrInvalid: `key "k" is a semaphore, not a mutex`, want being the kind
// of the caller.
func mixedKind(key string, err error, want string) error {
	if err == nil || !redis.HasErrorPrefix(err, "KIND") {
		return err
	}
	have := strings.TrimSpace(strings.TrimPrefix(err.Error(), "KIND"))
	if name, ok := kindNames[have]; ok {
		have = name
	} else {
		have = "Redis " + have + " value"
	}
	return invalidf("key %q is a %s, not a %s", key, have, want)
}
