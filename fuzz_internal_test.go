package lock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
)

// fuzzReply is one reply a fuzzed "server" gives: a value or an error.
type fuzzReply struct {
	val any
	err error
}

// decodeReplies turns fuzz bytes into a list of replies, each led by a kind
// byte: an integer, a string, an array of such (nested once), NOSCRIPT,
// redis.Nil, another error, a nil value, a bool or a float.
func decodeReplies(data []byte) []fuzzReply {
	var out []fuzzReply
	for len(data) > 0 && len(out) < 16 {
		var r fuzzReply
		r, data = decodeOne(data, 0)
		out = append(out, r)
	}
	return out
}

func decodeOne(data []byte, depth int) (fuzzReply, []byte) {
	if len(data) == 0 {
		return fuzzReply{val: nil}, nil
	}
	kind, data := data[0]%9, data[1:]
	switch kind {
	case 0:
		var b [8]byte
		n := copy(b[:], data)
		return fuzzReply{val: int64(binary.LittleEndian.Uint64(b[:]))}, data[n:]
	case 1:
		n := 0
		if len(data) > 0 {
			n, data = int(data[0]%16), data[1:]
		}
		n = min(n, len(data))
		return fuzzReply{val: string(data[:n])}, data[n:]
	case 2:
		if depth > 0 {
			return fuzzReply{val: []any{}}, data
		}
		n := 0
		if len(data) > 0 {
			n, data = int(data[0]%5), data[1:]
		}
		arr := make([]any, 0, n)
		for range n {
			var e fuzzReply
			e, data = decodeOne(data, depth+1)
			if e.err != nil {
				arr = append(arr, e.err) // go-redis puts a nested error reply in place
				continue
			}
			arr = append(arr, e.val)
		}
		return fuzzReply{val: arr}, data
	case 3:
		return fuzzReply{err: errors.New("NOSCRIPT No matching script")}, data
	case 4:
		return fuzzReply{err: redis.Nil}, data
	case 5:
		return fuzzReply{err: errors.New("ERR fuzzed failure")}, data
	case 6:
		return fuzzReply{val: nil}, data
	case 7:
		return fuzzReply{val: len(data)%2 == 0}, data
	}
	return fuzzReply{val: float64(len(data)) / 3}, data
}

// fuzzServer answers every command a go-redis client sends with the next
// fuzzed reply, without any network: its hooks never call through.
type fuzzServer struct {
	replies []fuzzReply
	i       int
}

func (s *fuzzServer) answer(cmd redis.Cmder) {
	r := fuzzReply{err: redis.Nil}
	if len(s.replies) > 0 {
		r = s.replies[s.i%len(s.replies)]
		s.i++
	}
	if r.err != nil {
		cmd.SetErr(r.err)
		return
	}
	if o, ok := cmd.(*luascripts.OnceCmd); ok {
		cmd = o.Cmder // a release or handoff: the command it wraps
	}
	switch c := cmd.(type) {
	case *redis.Cmd: // a renewal, by go-redis's Script
		c.SetVal(r.val)
	case interface{ SetVal(int64) }: // an IntCmd
		// What go-redis makes of a reply that is not an integer: an
		// error (it also reads a decimal string as one).
		switch v := r.val.(type) {
		case int64:
			c.SetVal(v)
		case string:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				cmd.SetErr(err)
				return
			}
			c.SetVal(n)
		default:
			cmd.SetErr(fmt.Errorf("fuzz: not an integer reply: %#v", v))
		}
	default:
		cmd.SetErr(errors.New("fuzz: unexpected command type"))
	}
}

func (s *fuzzServer) DialHook(redis.DialHook) redis.DialHook {
	return func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("fuzz: no network")
	}
}

func (s *fuzzServer) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		s.answer(cmd)
		return cmd.Err()
	}
}

func (s *fuzzServer) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(_ context.Context, cmds []redis.Cmder) error {
		var first error
		for _, c := range cmds {
			s.answer(c)
			if first == nil {
				first = c.Err()
			}
		}
		return first
	}
}

// isInt64 reports whether v is the shape acquire.lua replies with: an
// integer (go-redis also reads a decimal string as an integer).
func isInt64(v any) bool {
	switch v := v.(type) {
	case int64:
		return true
	case string:
		_, err := strconv.ParseInt(v, 10, 64)
		return err == nil
	}
	return false
}

// FuzzScriptReplies feeds the script backend arbitrary replies, as a
// broken server or proxy might send, for acquire, release, extend, pttl and
// a pipelined renewal. None may panic; an acquire reply that is not an
// integer must be an error, never a hold.
func FuzzScriptReplies(f *testing.F) {
	f.Add([]byte{0, 5})                                              // acquired, fence 5
	f.Add([]byte{0, 0x9c, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // held by another, 99ms left
	f.Add([]byte{1, 3, '1', '2', '3'})                               // a decimal string
	f.Add([]byte{1, 3, 'a', 'b', 'c'})
	f.Add([]byte{2, 2, 0, 1, 0, 5})    // {1, 5}: an array, not an integer
	f.Add([]byte{3, 2, 2, 0, 2, 0, 9}) // NOSCRIPT, then a reply
	f.Add([]byte{4})
	f.Add([]byte{6})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // -1
	f.Add([]byte{0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // -2
	f.Add([]byte{8, 7, 2, 0, 5})
	// One client for every run (runs in a process are sequential); it can
	// never reach a network: the hooks answer and its dialer refuses.
	srv := &fuzzServer{}
	rdb := redis.NewClient(&redis.Options{
		Addr:       "127.0.0.1:1",
		MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("fuzz: no network")
		},
	})
	f.Cleanup(func() { rdb.Close() })
	rdb.AddHook(srv)
	f.Fuzz(func(t *testing.T, data []byte) {
		srv.replies, srv.i = decodeReplies(data), 0
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		kv := luascripts.NewKeys(DefaultPrefix, "fuzz")
		k := &kv
		for _, reentrant := range []bool{false, true} {
			be := &scriptBackend{rdb: rdb, reentrant: reentrant, fencing: true}
			start := srv.i
			r, err := be.acquire(ctx, k, "tok", time.Second)
			if err == nil {
				// The reply that decided is the last one served (after a
				// NOSCRIPT, the EVAL's).
				last := srv.replies[(srv.i-1)%len(srv.replies)]
				if !isInt64(last.val) || last.err != nil {
					t.Fatalf("acquire accepted reply %#v (served %d..%d): %+v", last, start, srv.i, r)
				}
			}
			_, _ = be.release(ctx, k, "tok")
			_, _ = be.extend(ctx, k, "tok", time.Second)
			// Out-of-range integers (a status of 7, a pttl of -3) pass
			// through unchecked; only their shape is checked here.
			_, _ = be.pttl(ctx, k, "tok")
			items := []renewItem{{k: k, token: "a", ttl: time.Second}, {k: k, token: "b", ttl: time.Second}, {k: k, token: "c", ttl: time.Second}}
			st := make([]extendStatus, len(items))
			errs := make([]error, len(items))
			be.renew(ctx, items, st, errs)
		}
	})
}
