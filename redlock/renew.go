package redlock

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// The engine (internal/lease) renews every hold of a Client in one loop,
// at TTL/3, and sends the renewals due together: one batch per renewal
// group, one pipeline per node.

// renewGroup is the holds one renewal call may carry: those of one Client
// with one configured node timeout and one quorum.
type renewGroup struct {
	c       *Client
	timeout time.Duration // the configured node timeout (WithNodeTimeout)
	quorum  int
}

// group returns the renewal group of the holds of s.
func (s *settings) group(context.Context, *lease.Hold) lease.Group {
	return renewGroup{c: s.c, timeout: s.config.nodeTimeout, quorum: s.quorum}
}

// extendAll extends every hold of items on node i, one pipeline. A call
// that panics (a go-redis hook, say) fails for every hold with an error
// matching lock.ErrPanicked, logged once: the holds are retried like
// those of a node that did not answer.
func (c *Client) extendAll(ctx context.Context, i int, rdb redis.UniversalClient, items []luascripts.ExtendItem) (cmds []*redis.Cmd) {
	defer func() {
		if v := recover(); v != nil {
			err := lease.Recovered(c.eng.Logger, "redlock renewal call", v, slog.Int("node", i))
			cmds = make([]*redis.Cmd, len(items))
			for j := range cmds {
				cmds[j] = redis.NewCmd(ctx)
				cmds[j].SetErr(err)
			}
		}
	}()
	return luascripts.ExtendAll(ctx, rdb, items, false)
}

// Renew extends every hold of hs on every node, one pipeline per node, each
// bounded by the node timeout for the shortest TTL in the batch and by
// ctx, and counts each hold's quorum: a hold is confirmed by a quorum of
// nodes, lost when so many nodes lack our token that no quorum is
// possible, and failed (retried) otherwise. It returns once every node's
// call has returned, so that no write of the batch can land later.
func (g renewGroup) Renew(ctx context.Context, hs []*lease.Hold, ttls []time.Duration, out []lease.Outcome) {
	c := g.c
	n := len(c.nodes)
	items := make([]luascripts.ExtendItem, len(hs))
	timeout := time.Duration(math.MaxInt64)
	for i, h := range hs {
		items[i] = luascripts.ExtendItem{Keys: &h.Handle().Keys, Token: h.Token(), TTL: ttls[i]}
		timeout = min(timeout, nodeTimeoutFor(g.timeout, ttls[i]))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	replies := make([][]*redis.Cmd, n)
	var wg sync.WaitGroup
	for i, rdb := range c.nodes {
		wg.Add(1)
		c.run(task{fn: func() {
			defer wg.Done()
			replies[i] = c.extendAll(ctx, i, rdb, items)
		}})
	}
	wg.Wait()
	for j := range hs {
		t := tally{n: n}
		for i := range n {
			v, err := replies[i][j].Int64()
			t.add(i, v, err)
		}
		switch {
		case t.ok >= g.quorum:
			// Nodes that failed or did not answer may still apply the TTL
			// later.
			out[j] = lease.Outcome{Status: lease.Confirmed, Unknown: t.failed > 0}
		case t.gone+t.stolen > n-g.quorum:
			out[j] = lease.Outcome{Status: t.lost()}
		default:
			out[j] = lease.Outcome{Err: t.quorumError(g.quorum)}
		}
	}
}
