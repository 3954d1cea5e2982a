package lock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestUnreachable: network failures fall back; error replies, the
// caller's context and a closed client do not.
func TestUnreachable(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{dial, true},
		{fmt.Errorf("acquire: %w", dial), true},
		{syscall.ECONNRESET, true},
		{io.EOF, true},
		{redis.ErrPoolTimeout, true},
		{&net.OpError{Op: "read", Net: "tcp", Err: errTimeout{}}, true},
		{replyErr("LOADING Redis is loading the dataset in memory"), false},
		{replyErr("NOSCRIPT No matching script"), false},
		{replyErr("ERR Error running script"), false},
		{context.DeadlineExceeded, false},
		{context.Canceled, false},
		{redis.ErrClosed, false},
		{errors.New("anything else"), false},
		{nil, false},
	} {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("unreachable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

type errTimeout struct{}

func (errTimeout) Error() string   { return "i/o timeout" }
func (errTimeout) Timeout() bool   { return true }
func (errTimeout) Temporary() bool { return true }

// TestFallbackOptions: unknown fallbacks and negative caps are ErrInvalid;
// the names print.
func TestFallbackOptions(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	c := NewClient(rdb)
	defer c.Close()
	ctx := context.Background()
	for _, o := range []Option{WithFallback(Fallback(7)), WithFallback(-1), WithMaxWaiters(-1)} {
		if err := c.NewLock("k", o).Acquire(ctx); !errors.Is(err, ErrInvalid) {
			t.Errorf("Acquire error = %v, want ErrInvalid", err)
		}
	}
	if s := FallbackLocal.String() + " " + FallbackNone.String() + " " + Fallback(9).String(); s != "local none Fallback(9)" {
		t.Errorf("String() = %q", s)
	}
}

// replyErr is a Redis error reply, as go-redis's proto.RedisError.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}
