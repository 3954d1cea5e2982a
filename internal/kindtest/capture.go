package kindtest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ScriptKeys returns the KEYS of cmd when it runs a script (EVAL or
// EVALSHA), nil otherwise.
func ScriptKeys(cmd redis.Cmder) []string {
	args := cmd.Args()
	if name := strings.ToLower(cmd.Name()); (name != "eval" && name != "evalsha") || len(args) < 3 {
		return nil
	}
	n, _ := args[2].(int)
	if n <= 0 || len(args) < 3+n {
		return nil
	}
	keys := make([]string, n)
	for i, k := range args[3 : 3+n] {
		keys[i], _ = k.(string)
	}
	return keys
}

// FirstScript keeps a copy of the arguments of the
// first script call (EVAL or EVALSHA, sent alone or in a pipeline) whose
// KEYS include its key, seen by a SeeCommands hook. A test
// replays the copy later, as the bytes of a first send that go-redis gave
// up on (and resent on another connection) may reach Redis late.
type FirstScript struct {
	key  string
	mu   sync.Mutex
	args []any
}

// CaptureFirstScript adds a FirstScript hook for Redis key key to rdb.
func CaptureFirstScript(rdb *redis.Client, key string) *FirstScript {
	h := &FirstScript{key: key}
	rdb.AddHook(SeeCommands(h.see))
	return h
}

func (h *FirstScript) see(cmd redis.Cmder) {
	if !slices.Contains(ScriptKeys(cmd), h.key) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.args == nil {
		h.args = slices.Clone(cmd.Args())
	}
}

// Replay sends the captured call again through rdb, as a late copy of it;
// it fails the test when none was captured or the call fails.
func (h *FirstScript) Replay(t testing.TB, rdb redis.UniversalClient) {
	t.Helper()
	h.mu.Lock()
	args := h.args
	h.mu.Unlock()
	if args == nil {
		t.Fatalf("no script call on %s was seen", h.key)
	}
	if err := rdb.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("late copy of %v on %s: %v", args[0], h.key, err)
	}
}

// SeeCommands is a go-redis hook that calls itself with every command
// (sent alone or in a pipeline) before the command goes out, and changes
// nothing.
type SeeCommands func(redis.Cmder)

// DialHook lets dials through unchanged.
func (SeeCommands) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook sees each command sent alone.
func (see SeeCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		see(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook sees each command of a pipeline.
func (see SeeCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			see(cmd)
		}
		return next(ctx, cmds)
	}
}
