package lock

import (
	"context"
	"time"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// multiGroup renews the holds of one MultiLock: for each, one
// multi_extend.lua per slot group, all in one pipeline. The slot groups
// are extended one by one, not at once: a hold that one group finds gone
// or taken is lost, and its members in the other groups, which that call
// may have extended, are released before Renew returns (releaseLost).
type multiGroup struct{ m *MultiLock }

// Renew extends every hold hs[i] to ttls[i].
func (g multiGroup) Renew(ctx context.Context, hs []*lease.Hold, ttls []time.Duration, out []lease.Outcome) {
	m := g.m
	var calls []luascripts.Call
	for i, h := range hs {
		for _, grp := range m.groups {
			keys := make([]string, 0, 2*len(grp))
			for j := range grp {
				keys = append(keys, grp[j].Lock())
				if m.cfg.fencing {
					keys = append(keys, grp[j].Fence()) // kept alive with the lock
				}
			}
			calls = append(calls, luascripts.Call{Script: luascripts.MultiExtend, Keys: keys,
				Args: []any{h.Token(), ms(ttls[i]), flag(m.cfg.fencing)}})
		}
	}
	cmds := luascripts.EvalAll(ctx, m.cfg.c.rdb, calls)
	n := len(m.groups)
	for i := range hs {
		out[i] = outcome(renewed(cmds[i*n : (i+1)*n]))
	}
	// A member gone because an operator force-released it, the force
	// message missed, is reported force-released, not vanished.
	markForcedBy(ctx, m.cfg.c.rdb, hs, out, m.forceRecords)
	for i, h := range hs {
		if s := out[i].Status; s == lease.Gone || s == lease.Stolen || s == lease.Forced {
			// The hold is lost, but the other groups may have just been
			// extended: they go now, before the loss is reported.
			m.releaseLost(ctx, h.Token())
		}
	}
}
