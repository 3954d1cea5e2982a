package luascripts_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
)

// TestUndo_tombstoneRefusesLateAcquire, on a real server and on miniredis:
// Undo drops the token's hold and leaves a tombstone with the given TTL;
// an acquire of that token carrying the tombstone is then refused without
// a write, and one of another token is not.
func TestUndo_tombstoneRefusesLateAcquire(t *testing.T) {
	servers := map[string]func(t *testing.T) *redis.Client{
		"real": func(t *testing.T) *redis.Client { return redistest.Start(t, redistest.Config{}).Client(t) },
		"miniredis": func(t *testing.T) *redis.Client {
			rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
			t.Cleanup(func() { rdb.Close() })
			return rdb
		},
	}
	for name, start := range servers {
		t.Run(name, func(t *testing.T) {
			rdb := start(t)
			ctx := context.Background()
			k := luascripts.NewKeys("lock:", t.Name())
			acquire := func(token string) int64 {
				t.Helper()
				v, err := luascripts.Acquire.Run(ctx, rdb, k.TombstoneAcquireKeys(token), token, 60000, "0", "1").Int64()
				if err != nil {
					t.Fatalf("Acquire(%s) error = %v", token, err)
				}
				return v
			}
			if ours, _, _ := luascripts.AcquireReply(acquire("a")); !ours {
				t.Fatal("Acquire(a) on a free key refused")
			}
			v, err := luascripts.Undo.Run(ctx, rdb, k.UndoKeys("a"), "a", "0", 5000).Int64()
			if err != nil || v != 1 {
				t.Fatalf("Undo(a) = %d, %v; want 1 (released)", v, err)
			}
			if d := rdb.PTTL(ctx, k.Undone("a")).Val(); d <= 0 || d > 5*time.Second {
				t.Fatalf("tombstone PTTL = %v, want in (0, 5s]", d)
			}
			if ours, _, _ := luascripts.AcquireReply(acquire("a")); ours {
				t.Fatal("Acquire(a) after its undo took the key, want it refused")
			}
			if n := rdb.Exists(ctx, k.Lock()).Val(); n != 0 {
				t.Fatal("the refused acquire wrote the lock")
			}
			if ours, _, _ := luascripts.AcquireReply(acquire("b")); !ours {
				t.Fatal("Acquire(b) refused by a's tombstone")
			}
		})
	}
}
