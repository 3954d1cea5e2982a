package adminhook

import "github.com/redis/go-redis/v9"

// KeepsDeadlines reports whether rdb ends a call at its context's deadline
// on its own (ContextTimeoutEnabled); otherwise a call to a server that
// does not answer lasts until go-redis's read timeout, whatever the
// context says.
func KeepsDeadlines(rdb redis.UniversalClient) bool {
	switch v := rdb.(type) {
	case *redis.Client:
		return v.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return v.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return v.Options().ContextTimeoutEnabled
	}
	return false
}
