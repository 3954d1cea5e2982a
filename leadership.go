package lock

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Leadership is the state of an election: who leads it, with which value,
// since when and in which term. The zero Leadership means that nobody
// leads (Term 0), as [Election.Observe] reports it.
type Leadership struct {
	// Value is what the leader campaigned with, or last proclaimed.
	Value string
	// Term is the leader's term: a fencing token, greater than every term
	// of the election before it (see [Election.Term]).
	Term int64
	// Since is when the term began, on the Redis server's clock
	// (millisecond precision).
	Since time.Time
}

// readLeader reads the election at k: its state, the time left on the
// leader's term, and ErrNoLeader when nobody leads. One MULTI on one key.
func readLeader(ctx context.Context, rdb redis.UniversalClient, k *keys) (Leadership, time.Duration, error) {
	var (
		get *redis.SliceCmd
		ttl *redis.DurationCmd
	)
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.HMGet(ctx, k.Lock(), "term", "value", "since", "", "mode")
		ttl = p.PTTL(ctx, k.Lock())
		return nil
	})
	if isWrongType(err) {
		have := "mutex"
		if rdb.Type(ctx, k.Lock()).Val() == "zset" {
			have = "semaphore"
		}
		return Leadership{}, 0, kindError(k.User, have, "election")
	}
	if err != nil {
		return Leadership{}, 0, err
	}
	f := get.Val()
	term, _ := f[0].(string)
	value, _ := f[1].(string)
	since, _ := f[2].(string)
	switch {
	case f[3] != nil: // a re-entrant mutex's hash
		return Leadership{}, 0, kindError(k.User, "mutex", "election")
	case f[4] != nil:
		return Leadership{}, 0, kindError(k.User, "rwlock", "election")
	case term == "":
		return Leadership{}, 0, ErrNoLeader // no such key (PTTL -2)
	}
	t, err1 := strconv.ParseInt(term, 10, 64)
	ms, err2 := strconv.ParseInt(since, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Leadership{}, 0, err
	}
	return Leadership{Value: value, Term: t, Since: time.UnixMilli(ms)}, ttl.Val(), nil
}
