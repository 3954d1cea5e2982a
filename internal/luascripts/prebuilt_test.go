package luascripts_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
)

// sent records the commands a client sends, but those of its connection
// handshake: each one's name and whether go-redis may resend it.
type sent struct {
	mu    sync.Mutex
	names []string
	retry []bool
}

func (s *sent) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *sent) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (s *sent) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "hello" || n == "client" {
			return next(ctx, cmd)
		}
		s.mu.Lock()
		s.names = append(s.names, cmd.Name())
		s.retry = append(s.retry, !cmd.NoRetry())
		s.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (s *sent) take() ([]string, []bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names, retry := s.names, s.retry
	s.names, s.retry = nil, nil
	return names, retry
}

// A Prebuilt call sends EVALSHA, and the whole script by EVAL on a server
// that lacks it; its arguments serve any number of servers; with once,
// go-redis does not resend its commands.
func TestPrebuilt_Send(t *testing.T) {
	ctx := context.Background()
	rdbs := make([]*redis.Client, 2)
	hooks := make([]*sent, 2)
	for i := range rdbs {
		rdbs[i] = redistest.Start(t, redistest.Config{}).Client(t)
		hooks[i] = new(sent)
		rdbs[i].AddHook(hooks[i])
	}
	keys := luascripts.NewKeys("lock:", "k")
	acquire := luascripts.NewPrebuilt(luascripts.AcquireBoxed, false, keys.AcquireKeys(), "tok", 10_000, "0", "0", "0")
	release := luascripts.NewPrebuilt(luascripts.ReleaseBoxed, true, keys.ReleaseKeys(), "tok", "0")
	for i, rdb := range rdbs {
		v, err := acquire.Send(ctx, rdb).Result()
		if ours, _, _ := luascripts.AcquireReply(v); err != nil || !ours {
			t.Fatalf("node %d: acquire Send() = %d, %v; want a grant", i, v, err)
		}
		if d := rdb.PTTL(ctx, keys.Lock()).Val(); d <= 0 || d > 10*time.Second {
			t.Fatalf("node %d: PTTL after acquire = %v, want in (0, 10s]", i, d)
		}
		if v, err := release.Send(ctx, rdb).Result(); v != 1 || err != nil {
			t.Fatalf("node %d: release Send() = %d, %v; want 1, nil", i, v, err)
		}
		if v, err := release.Send(ctx, rdb).Result(); v != 0 || err != nil {
			t.Fatalf("node %d: second release Send() = %d, %v; want 0 (gone), nil", i, v, err)
		}
		names, retry := hooks[i].take()
		// A fresh server lacks both scripts: EVALSHA, then EVAL, once each.
		want := []string{"evalsha", "eval", "pttl", "evalsha", "eval", "evalsha"}
		wantRetry := []bool{true, true, true, false, false, false}
		if len(names) != len(want) {
			t.Fatalf("node %d: commands sent = %v, want %v", i, names, want)
		}
		for j := range want {
			if names[j] != want[j] || retry[j] != wantRetry[j] {
				t.Fatalf("node %d: commands sent = %v (resendable %v), want %v (resendable %v)", i, names, retry, want, wantRetry)
			}
		}
	}
}
