package admin

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/adminhook"
)

// auditTimeout bounds the separate XADD of a force-release's entry.
const auditTimeout = 5 * time.Second

// auditForce records the force-release of key's hold with token ("" for a
// key that named no holder) on the audit stream with a separate XADD, for
// a stream the script cannot write to. A failed XADD drops the entry: the release itself succeeded.
func (a *Admin) auditForce(ctx context.Context, key, token string) {
	if a.hooks.AuditForce != nil {
		a.hooks.AuditForce(ctx, key, token)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	host, _ := os.Hostname()
	token, hold := adminhook.AuditToken(token)
	vals := []any{"event", "force-released", "key", key, "token", token, "fence", "0",
		"owner", "", "host", host, "pid", strconv.Itoa(os.Getpid()), "metadata", "",
		"time", time.Now().Format(time.RFC3339Nano)}
	if hold != "" {
		vals = append(vals, "hold", hold)
	}
	_ = a.rdb.XAdd(ctx, &redis.XAddArgs{Stream: a.stream, MaxLen: a.maxLen, Approx: true, Values: vals}).Err()
}
