package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/keyglob"
)

// scanCount is the COUNT hint of fences' SCAN calls.
const scanCount = 512

// fenceReport is what fences finds.
type fenceReport struct {
	Keys      int      `json:"keys"`        // the library's keys under the prefix
	FenceKeys int      `json:"fence_keys"`  // P{K}:fence counters
	NoTTL     int      `json:"no_ttl"`      // keys without a TTL
	NoTTLKeys []string `json:"no_ttl_keys"` // their names, sorted
	Masters   int      `json:"masters"`     // nodes scanned
}

// cmdFences counts the fence keys and the keys without a TTL.
func cmdFences(ctx context.Context, g *globals, args []string, stdout, stderr io.Writer) error {
	pos, err := parse(flag.NewFlagSet("fences", flag.ContinueOnError), g, args, stderr)
	if err != nil {
		return err
	}
	if err := wantArgs("fences", pos, 0, 0, ""); err != nil {
		return err
	}
	rdb, err := connect(ctx, g)
	if err != nil {
		return err
	}
	defer rdb.Close()
	nodes, err := masters(ctx, rdb)
	if err != nil {
		return err
	}
	r := fenceReport{Masters: len(nodes), NoTTLKeys: []string{}}
	for _, n := range nodes {
		if err := scanNode(ctx, n, g.prefix, &r); err != nil {
			return err
		}
	}
	sort.Strings(r.NoTTLKeys)
	if g.json {
		return writeJSON(stdout, r)
	}
	fmt.Fprintf(stdout, "masters scanned:   %d\nlibrary keys:      %d\nfence keys:        %d\nkeys without TTL:  %d\n",
		r.Masters, r.Keys, r.FenceKeys, r.NoTTL)
	for _, k := range r.NoTTLKeys {
		fmt.Fprintf(stdout, "  %s\n", k)
	}
	return nil
}

// masters returns every master of a cluster, else the one client.
func masters(ctx context.Context, rdb redis.UniversalClient) ([]redis.Cmdable, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return []redis.Cmdable{rdb}, nil
	}
	var (
		mu    sync.Mutex
		nodes []redis.Cmdable
	)
	err := cc.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
		mu.Lock()
		nodes = append(nodes, n)
		mu.Unlock()
		return nil
	})
	return nodes, err
}

// scanNode counts one node's library keys into r: every key P{K} or
// P{K}:name under prefix P.
func scanNode(ctx context.Context, n redis.Cmdable, prefix string, r *fenceReport) error {
	match := keyglob.Escape(prefix) + "{*"
	var cursor uint64
	for {
		keys, next, err := n.Scan(ctx, cursor, match, scanCount).Result()
		if err != nil {
			return err
		}
		cmds := make([]*redis.DurationCmd, len(keys))
		if len(keys) > 0 {
			_, err = n.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, k := range keys {
					cmds[i] = p.PTTL(ctx, k)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		for i, k := range keys {
			if !libraryKey(prefix, k) {
				continue
			}
			ttl := cmds[i].Val()
			if ttl == -2 { // gone since the SCAN (go-redis keeps -1/-2 as nanoseconds)
				continue
			}
			r.Keys++
			if strings.HasSuffix(k, "}:fence") {
				r.FenceKeys++
			}
			if ttl == -1 {
				r.NoTTL++
				r.NoTTLKeys = append(r.NoTTLKeys, k)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// libraryKey says whether rk has the shape of a lock's key under prefix:
// P{K} or P{K}:name.
func libraryKey(prefix, rk string) bool {
	rest, ok := strings.CutPrefix(rk, prefix+"{")
	if !ok {
		return false
	}
	i := strings.LastIndex(rest, "}")
	return i > 0 && (i == len(rest)-1 || (rest[i+1] == ':' && i+2 < len(rest)))
}
