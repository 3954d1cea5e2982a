package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
)

// The engine (internal/lease) renews every hold of a Client in one loop and
// sends the renewals due together in batches, one per renewal group: for
// the core, one backend and, on a Redis Cluster, one master.

// renewGroup is the holds one renewal call may carry: one backend and, on
// a Redis Cluster, one master. Each group is sent, watched and judged on
// its own, so a stalled master delays the holds on no other master: go-redis
// splits a cluster pipeline by node, but Exec returns only when every node
// has answered.
type renewGroup struct {
	be   backend
	rdb  scripter // the Client's: reads the force records (markForced)
	node string   // the master's address on a cluster; "" elsewhere
}

// group returns the renewal group of h now: s.grp, with h's master on a
// cluster.
func (s *settings) group(ctx context.Context, h *lease.Hold) lease.Group {
	cl, ok := s.c.rdb.(*redis.ClusterClient)
	if !ok {
		return s.grp
	}
	g := s.grp.(renewGroup)
	g.node = masterAddr(ctx, cl, h.Handle().Keys.Lock())
	return g
}

// masterAddr returns the address of the cluster master serving key, or ""
// when the slot map is not at hand (go-redis still routes each command of a
// pipeline by itself).
func masterAddr(ctx context.Context, cl *redis.ClusterClient, key string) string {
	if node, err := cl.MasterForKey(ctx, key); err == nil {
		return node.Options().Addr
	}
	return ""
}

// Renew sends the renewals of hs through the group's backend.
func (g renewGroup) Renew(ctx context.Context, hs []*lease.Hold, ttls []time.Duration, out []lease.Outcome) {
	if !g.renewMixed(ctx, hs, ttls, out) { // read-write holds among them (rwlock_renew.go)
		g.renew(ctx, hs, ttls, out)
	}
	markForced(ctx, g.rdb, hs, out)
}

// renew sends the renewals of hs, none a read-write hold's, through the
// group's backend.
func (g renewGroup) renew(ctx context.Context, hs []*lease.Hold, ttls []time.Duration, out []lease.Outcome) {
	items := make([]renewItem, len(hs))
	for i, h := range hs {
		items[i] = renewItem{k: &h.Handle().Keys, token: h.Token(), ttl: ttls[i]}
	}
	st := make([]extendStatus, len(items))
	errs := make([]error, len(items))
	g.be.renew(ctx, items, st, errs)
	for i := range out {
		out[i] = outcome(st[i], errs[i])
	}
}

// outcome is the engine's view of a backend's answer about one hold.
// extendGone is the zero extendStatus, so each status is named.
func outcome(st extendStatus, err error) lease.Outcome {
	switch {
	case err != nil:
		return lease.Outcome{Err: err}
	case st == extendOK:
		return lease.Outcome{Status: lease.Confirmed}
	case st == extendStolen:
		return lease.Outcome{Status: lease.Stolen}
	}
	return lease.Outcome{Status: lease.Gone}
}

// markForced turns into [lease.Forced] the outcome of each hold of hs that
// out reports gone and whose token the force record of its key
// (forcerelease.lua) holds: a force release removed it, and the holder
// missed the message. One pipelined call, sent only when a key was found
// gone; when it fails, or the Client has no Redis client, those holds stay
// gone (reported as vanished).
func markForced(ctx context.Context, rdb scripter, hs []*lease.Hold, out []lease.Outcome) {
	markForcedBy(ctx, rdb, hs, out, func(h *lease.Hold) []string { return []string{h.Handle().Keys.Forced()} })
}

// markForcedBy is markForced for holds of several keys: records(h) names
// the force records of h's keys, and a hold is forced when any holds its
// token.
func markForcedBy(ctx context.Context, rdb scripter, hs []*lease.Hold, out []lease.Outcome, records func(*lease.Hold) []string) {
	if rdb == nil {
		return
	}
	var p redis.Pipeliner
	cmds := make(map[int][]*redis.BoolCmd)
	for i := range out {
		if out[i].Status != lease.Gone {
			continue
		}
		if p == nil {
			p = rdb.Pipeline()
		}
		for _, key := range records(hs[i]) {
			cmds[i] = append(cmds[i], p.SIsMember(ctx, key, hs[i].Token()))
		}
	}
	if p == nil {
		return
	}
	_, _ = p.Exec(ctx)
	for i, cs := range cmds {
		for _, cmd := range cs {
			if cmd.Val() {
				out[i].Status = lease.Forced
			}
		}
	}
}
