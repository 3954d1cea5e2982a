package redistest_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/redistest"
)

func TestStartTLS(t *testing.T) {
	t.Parallel()
	s, cfg := redistest.StartTLS(t)
	ctx := ctxT(t, 10*time.Second)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), TLSConfig: cfg})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("Ping() over TLS error = %v", err)
	}
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("Server.Client Ping() error = %v", err)
	}
	plain := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, ReadTimeout: time.Second})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("Ping() without TLS error = nil, want an error")
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart() of a TLS server error = %v", err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("Ping() over TLS after Restart error = %v", err)
	}
}
