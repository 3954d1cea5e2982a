package lock

import (
	"context"

	"github.com/agentlock/lock/internal/lease"
)

// callBounded makes call, one call of c's to Redis outside the engine's
// verbs (a read such as Inspect, an operator's verb), so that it returns by
// ctx's deadline: on a goroutine of the engine when ctx has a deadline that
// go-redis would not keep (see keepsDeadlines), otherwise on the caller's.
// It returns call's error, or, when ctx ended first, an error matching
// context.Cause(ctx) that says the call's outcome is unknown; the call then
// runs on, and Client.Close waits for it (up to lease.BackgroundWait).
func (c *Client) callBounded(ctx context.Context, call func() error) error {
	if _, ok := ctx.Deadline(); !ok || keepsDeadlines(c.rdb) {
		return call()
	}
	err, ok := lease.CallOn(&c.eng, ctx, call)
	if !ok {
		return lease.Unanswered(ctx)
	}
	return err
}
