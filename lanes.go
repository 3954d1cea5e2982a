package lock

import (
	"context"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
)

// lanes gives each Redis node its own coalescer on a cluster, so that a
// shared pipeline never waits for a node other than its own (a slow or dead
// master would otherwise hold up calls to the healthy ones), and one
// coalescer for everything elsewhere.
type lanes struct {
	rdb     scripter
	lg      *slog.Logger
	cluster *redis.ClusterClient // nil unless rdb is one

	mu     sync.Mutex
	byNode map[string]*coalescer // by master address, on a cluster
	one    *coalescer
}

// newLanes returns the lanes of rdb, logging to lg.
func newLanes(rdb redis.UniversalClient, lg *slog.Logger) *lanes {
	ls := &lanes{rdb: rdb, lg: lg}
	if cl, ok := rdb.(*redis.ClusterClient); ok {
		ls.cluster, ls.byNode = cl, map[string]*coalescer{}
	} else {
		ls.one = newCoalescer(rdb, lg)
	}
	return ls
}

// lane returns the coalescer for the node serving key. When the cluster's
// slot map is not at hand, calls share one lane: go-redis routes each
// command of a pipeline by itself either way.
func (ls *lanes) lane(ctx context.Context, key string) *coalescer {
	if ls.cluster == nil {
		return ls.one
	}
	addr := masterAddr(ctx, ls.cluster, key)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	co := ls.byNode[addr]
	if co == nil {
		co = newCoalescer(ls.rdb, ls.lg)
		ls.byNode[addr] = co
	}
	return co
}
