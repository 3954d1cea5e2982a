package luascripts_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
)

// setCalls is how many SET commands rdb's server has run, those inside
// scripts included (INFO commandstats).
func setCalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	for line := range strings.SplitSeq(rdb.Info(context.Background(), "commandstats").Val(), "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_set:calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			if err != nil {
				t.Fatalf("commandstats line %q: %v", line, err)
			}
			return n
		}
	}
	return 0
}

// TestAcquire_fastPath: acquire_fast.lua takes a free key and hands out the
// next fence; a new key's counter still restarts from the clock with its
// TTL (acquire.lua, after the fast path's INCR), a taken key is asked once
// (one SET), and the holder's retry confirms its hold.
func TestAcquire_fastPath(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	keys := luascripts.NewKeys("lock:", "k")
	acquire := func(token, fencing string) int64 {
		t.Helper()
		n, err := luascripts.Acquire.Run(ctx, rdb, keys.AcquireKeys(), token, 10_000, "0", fencing).Int64()
		if err != nil {
			t.Fatalf("acquire(%s) error = %v", token, err)
		}
		return n
	}

	f1 := acquire("a", "1") // no counter yet: INCR makes 1, which restarts
	if f1 < luascripts.Clocked {
		t.Fatalf("fence of a new key = %d, want >= %d (from the clock)", f1, int64(luascripts.Clocked))
	}
	if d := rdb.PTTL(ctx, keys.Fence()).Val(); d <= 0 {
		t.Fatalf("fence counter PTTL = %v, want > 0", d)
	}
	rdb.Del(ctx, keys.Lock())
	if f2 := acquire("b", "1"); f2 != f1+1 {
		t.Fatalf("fence of the next hold = %d, want %d", f2, f1+1)
	}
	if d := rdb.PTTL(ctx, keys.Fence()).Val(); d <= 0 {
		t.Fatalf("fence counter PTTL after INCR = %v, want > 0 (kept)", d)
	}

	before := setCalls(t, rdb)
	if n := acquire("c", "1"); n >= 0 {
		t.Fatalf("acquire of a taken key = %d, want < 0", n)
	} else if _, _, left := luascripts.AcquireReply(n); left <= 0 {
		t.Fatalf("time left on the holder's hold = %v, want > 0", left)
	}
	if n := setCalls(t, rdb) - before; n != 1 {
		t.Fatalf("SETs run for one attempt on a taken key = %d, want 1", n)
	}
	if f := acquire("b", "1"); f < f1+2 {
		t.Fatalf("holder's retry = %d, want a fence >= %d", f, f1+2)
	}
	if v := rdb.Get(ctx, keys.Lock()).Val(); v != "b" {
		t.Fatalf("lock value = %q, want b", v)
	}

	rdb.Del(ctx, keys.Lock())
	if n := acquire("d", "0"); n != 0 {
		t.Fatalf("acquire without fencing = %d, want 0", n)
	}
}
