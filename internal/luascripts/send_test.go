package luascripts_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
)

// ExtendAll gives each item its own command, whose arguments are that
// item's alone, also when items differ in their keys (holder info on some)
// and in their TTL, and replays by EVAL the calls that met NOSCRIPT: each
// reply is the one extend.lua gives that item on its own.
func TestExtendAll_argumentsPerItem(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	keys := make([]luascripts.Keys, 6)
	items := make([]luascripts.ExtendItem, len(keys))
	for i := range items {
		keys[i] = luascripts.NewKeys("t:", fmt.Sprintf("%s:%d", t.Name(), i))
		items[i] = luascripts.ExtendItem{Keys: &keys[i], Token: fmt.Sprintf("token-%d", i),
			TTL: time.Duration(1+i/2) * time.Second, Holders: i%3 == 1, Fence: i%3 == 2}
	}
	for _, flush := range []bool{true, false} { // NOSCRIPT first, then by SHA
		if flush {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatalf("SCRIPT FLUSH: %v", err)
			}
		}
		cmds := luascripts.ExtendAll(ctx, rdb, items, false)
		if len(cmds) != len(items) {
			t.Fatalf("ExtendAll() = %d commands, want %d", len(cmds), len(items))
		}
		for i, cmd := range cmds {
			it := items[i]
			ks, counter := it.Keys.LockKeys(), "0"
			switch {
			case it.Holders:
				ks = it.Keys.InfoLockKeys()
			case it.Fence:
				ks, counter = it.Keys.AcquireKeys(), "1"
			}
			args := cmd.Args()
			var want []any
			for _, k := range ks {
				want = append(want, k)
			}
			want = append(want, it.Token, it.TTL.Milliseconds(), "0", counter)
			if got := args[3:]; !slices.Equal(got, want) {
				t.Errorf("flush %v, item %d: arguments after the script = %v, want %v", flush, i, got, want)
			}
			got, err := cmd.Int64()
			if err != nil {
				t.Fatalf("flush %v, item %d: reply error %v", flush, i, err)
			}
			one, err := luascripts.Extend.Run(ctx, rdb, ks, it.Token, it.TTL.Milliseconds(), "0").Int64()
			if err != nil || got != one {
				t.Errorf("flush %v, item %d: reply %d, want %d (extend.lua alone, err %v)", flush, i, got, one, err)
			}
		}
	}
}
