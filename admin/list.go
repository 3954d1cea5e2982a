package admin

import (
	"context"
	"iter"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/keyglob"
	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// listCount is the COUNT hint of List's SCAN calls.
const listCount = 256

// List yields the [Info] of every lock whose key matches pattern (a Redis
// glob over the caller's keys: "session:*"; "" for every lock), as
// [Admin.Inspect] reports it. It walks the keyspace with SCAN, never KEYS,
// so Redis is never blocked for long: on a Redis Cluster every master in
// turn, on a Ring every shard. It skips the locks' companion keys (fence
// counters, holder info, queues, stored results) and keys freed between
// the SCAN and their inspection. A key taken or freed while List runs may
// or may not be reported, as SCAN guarantees; none is reported twice.
//
// A failed call yields a zero Info (Key set when it concerns one key) and
// the error, and List goes on with the next key or node; stopping the
// range loop stops it. A nil Admin yields one error wrapping
// lock.ErrInvalid. The iterator may be ranged over more than once, each
// time afresh; it is not safe to range over it from several goroutines at
// once.
func (a *Admin) List(ctx context.Context, pattern string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		if a == nil || a.rdb == nil {
			yield(Info{}, lease.NewOpError("lock", "list", pattern, lease.Invalidf("nil Admin: make it with admin.New")))
			return
		}
		if pattern == "" {
			pattern = "*"
		}
		match := keyglob.Escape(a.prefix) + "{" + pattern + "}"
		seen := map[string]bool{}
		for _, node := range a.scanNodes(ctx) {
			if !a.scanNode(ctx, node, match, pattern, seen, yield) {
				return
			}
		}
	}
}

// scanNode yields the locks of one node, and whether List goes on.
func (a *Admin) scanNode(ctx context.Context, node scanner, match, pattern string, seen map[string]bool, yield func(Info, error) bool) bool {
	var cursor uint64
	for {
		var (
			keys []string
			next uint64
		)
		err := a.call(ctx, func() (err error) {
			keys, next, err = node.Scan(ctx, cursor, match, listCount).Result()
			return err
		})
		if err != nil {
			return yield(Info{}, lease.NewOpError("lock", "list", pattern, err))
		}
		for _, rk := range keys {
			user, ok := userKey(a.prefix, rk)
			if !ok || seen[rk] {
				continue
			}
			seen[rk] = true
			k := luascripts.NewKeys(a.prefix, user)
			info, err := a.inspect(ctx, &k)
			if err == nil && info.Kind == "" {
				continue // freed since the SCAN
			}
			if !yield(info, err) {
				return false
			}
		}
		if cursor = next; cursor == 0 {
			return true
		}
	}
}

// scanner is what List needs of a node: SCAN.
type scanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
}

// scanNodes returns the nodes List walks: every master of a cluster, every
// shard of a Ring, else the Admin's one client. A node list it cannot
// read yields the error from the first SCAN, on the client itself.
func (a *Admin) scanNodes(ctx context.Context) []scanner {
	var (
		mu    sync.Mutex
		nodes []scanner
	)
	add := func(_ context.Context, n *redis.Client) error {
		mu.Lock()
		nodes = append(nodes, n)
		mu.Unlock()
		return nil
	}
	switch v := a.rdb.(type) {
	case *redis.ClusterClient:
		if v.ForEachMaster(ctx, add) != nil || len(nodes) == 0 {
			return []scanner{v}
		}
	case *redis.Ring:
		if v.ForEachShard(ctx, add) != nil || len(nodes) == 0 {
			return []scanner{v}
		}
	default:
		return []scanner{a.rdb}
	}
	return nodes
}

// userKey returns the caller's key of the Redis key rk under prefix, and
// whether rk is a lock's primary key P{K} at all: companions P{K}:name end
// with their name, never with '}'.
func userKey(prefix, rk string) (string, bool) {
	rest, ok := strings.CutPrefix(rk, prefix+"{")
	if !ok || !strings.HasSuffix(rest, "}") || len(rest) < 2 {
		return "", false
	}
	return rest[:len(rest)-1], true
}
