package main

// BenchmarkClientPath measures what S1's client CPU column cannot resolve:
// each library's own work per TryAcquire+Release, without the network. A
// go-redis hook answers every script call in place (a lock granted, then
// released), so the loop runs go-redis's command building and the
// library's code but no socket, syscall or scheduler wake-up. Other
// commands (the Client's subscription) reach a real redis-server.
//
//	cd bench && go test -run '^$' -bench ClientPath -benchmem -count 10

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// scriptReplies is a go-redis hook that answers EVAL and EVALSHA itself:
// 1 to every call (a fence of 1, a release done), and passes the rest on.
type scriptReplies struct{}

func (scriptReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (scriptReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (scriptReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "eval", "evalsha":
		default:
			return next(ctx, cmd)
		}
		setOne(cmd)
		return nil
	}
}

// setOne sets cmd's reply to 1: an *redis.IntCmd or *redis.Cmd, or a
// wrapper that embeds one as its Cmder field.
func setOne(cmd redis.Cmder) {
	switch c := cmd.(type) {
	case *redis.IntCmd:
		c.SetVal(1)
	case *redis.Cmd:
		c.SetVal(int64(1))
	default:
		setOne(reflect.ValueOf(cmd).Elem().FieldByName("Cmder").Interface().(redis.Cmder))
	}
}

func BenchmarkClientPath(b *testing.B) {
	srv := redistest.Start(b, redistest.Config{})
	for _, fake := range []bool{true, false} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		b.Cleanup(func() { rdb.Close() })
		where := "net"
		if fake {
			rdb.AddHook(scriptReplies{})
			where = "inplace"
		}
		ctx := context.Background()
		b.Run(where+"/agentlock", func(b *testing.B) {
			c := lock.NewClient(rdb)
			defer c.Close()
			loopCPU(b, func() error {
				l := c.NewLock("cp:al")
				if ok, err := l.TryAcquire(ctx); !ok || err != nil {
					return fmt.Errorf("TryAcquire() = %v, %w", ok, err)
				}
				return l.Release(ctx)
			})
		})
		b.Run(where+"/redislock", func(b *testing.B) {
			c := redislock.New(rdb)
			loopCPU(b, func() error {
				l, err := c.Obtain(ctx, "cp:bsm", peerTTL, nil)
				if err != nil {
					return err
				}
				return l.Release(ctx)
			})
		})
	}
}

// loopCPU runs op b.N times and reports this process's CPU time per op.
func loopCPU(b *testing.B, op func() error) {
	b.Helper()
	for range 50 {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
}
