package lock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// multiKind is a MultiLock as the engine sees it (lease.Kind).
type multiKind MultiLock

func (k *multiKind) Token() (string, error) { return lease.NewToken() }

func (k *multiKind) CheckTTL(ttl time.Duration) error { return (*kind)(nil).CheckTTL(ttl) }

// Try takes the slot groups in order with token, which no other attempt
// carries (lease.Fresh). When a group is held by someone else, or
// its call fails, the attempt backs out before it reports: it releases the
// groups it took and undoes the group whose call failed (see backOut), so
// a waiting MultiLock holds no member between attempts.
func (k *multiKind) Try(ctx context.Context, token string) lease.Attempt {
	m := (*MultiLock)(k)
	start := time.Now()
	fences := make(map[string]int64, len(m.keys))
	for i, g := range m.groups {
		r, err := m.acquireGroup(ctx, g, token)
		if err != nil {
			if kerr := kindReply(m.hd.Keys.User, err, "mutex"); kerr != nil {
				// The script refused before it set anything in group i.
				return m.backOut(ctx, token, i, lease.Attempt{Err: kerr, Final: true})
			}
			// The call may have reached Redis and taken group i.
			return m.backOut(ctx, token, i+1, lease.Attempt{Err: err, Final: !retryable(err)})
		}
		if r[0] == 0 {
			return m.backOut(ctx, token, i, lease.Attempt{PTTL: time.Duration(r[1]) * time.Millisecond})
		}
		for j := range g {
			fences[g[j].User] = r[j+1]
		}
	}
	m.mu.Lock()
	m.token, m.fences = token, fences
	m.mu.Unlock()
	return lease.Attempt{OK: true, Fence: fences[m.keys[0]], Sent: start}
}

// acquireGroup runs multi_acquire.lua for token on slot group g and checks
// the shape of its reply.
func (m *MultiLock) acquireGroup(ctx context.Context, g []luascripts.Keys, token string) ([]int64, error) {
	keys := make([]string, 0, 2*len(g))
	for j := range g {
		keys = append(keys, g[j].AcquireKeys()...)
	}
	r, err := luascripts.MultiAcquire.Run(ctx, m.cfg.c.rdb, keys,
		token, ttlArg(m.cfg.ttl), flag(m.cfg.fencing)).Int64Slice()
	if err == nil && (len(r) < 1 || r[0] == 1 && len(r) != len(g)+1 || r[0] == 0 && len(r) != 2) {
		err = errors.New("lock: unexpected multi-lock acquire reply")
	}
	return r, err
}

// Undo releases every member an attempt with token may have taken.
func (k *multiKind) Undo(ctx context.Context, token string) {
	m := (*MultiLock)(k)
	_ = m.releaseOrLater(ctx, token, m.groups)
}

// Release releases every member of h.
// A member found gone that an operator force-released is reported so.
func (k *multiKind) Release(ctx context.Context, h *lease.Hold, _ bool) lease.Outcome {
	m := (*MultiLock)(k)
	out := []lease.Outcome{outcome(m.release(ctx, h.Token()))}
	markForcedBy(ctx, m.cfg.c.rdb, []*lease.Hold{h}, out, m.forceRecords)
	return out[0]
}

// Extend sets the TTL of every member of h, if all are ours.
func (k *multiKind) Extend(ctx context.Context, h *lease.Hold, ttl time.Duration) (lease.Outcome, <-chan struct{}) {
	var o [1]lease.Outcome
	multiGroup{(*MultiLock)(k)}.Renew(ctx, []*lease.Hold{h}, []time.Duration{ttl}, o[:])
	return o[0], nil
}

// release runs multi_release.lua for token on every slot group, in one
// pipeline, each call sent once. The worst status of the groups wins. The
// groups whose call failed are released again in the background.
func (m *MultiLock) release(ctx context.Context, token string) (extendStatus, error) {
	cmds := m.sendRelease(ctx, token, m.groups)
	st, err := worst("release", cmds)
	if err != nil {
		m.releaseLater(token, m.failed(cmds, m.groups))
	}
	return st, err
}

// sendRelease sends multi_release.lua for token on each of groups, in one
// pipeline, each call sent once, and returns one command per group.
func (m *MultiLock) sendRelease(ctx context.Context, token string, groups [][]luascripts.Keys) []*redis.Cmd {
	calls := make([]luascripts.Call, len(groups))
	s, src := m.cfg.c.pub.script(ctx, luascripts.MultiRelease, luascripts.MultiReleaseSrc)
	for i, g := range groups {
		keys := make([]string, 0, 2*len(g))
		for j := range g {
			keys = append(keys, g[j].ReleaseKeys()...)
		}
		calls[i] = luascripts.Call{Script: s, Src: src, Keys: keys, Args: []any{token}}
	}
	return luascripts.EvalAllOnce(ctx, m.cfg.c.rdb, calls)
}

// worst reads one status per slot group and returns the worst: an error,
// then stolen, then gone.
func worst(op string, cmds []*redis.Cmd) (extendStatus, error) {
	st := extendOK
	for _, cmd := range cmds {
		n, err := cmd.Int64()
		s, err := checkStatus(op, n, err)
		if err != nil {
			return 0, err
		}
		if s == extendStolen || s == extendGone && st == extendOK {
			st = s
		}
	}
	return st, nil
}

// forceRecords names the force record of every member (forcerelease.lua).
func (m *MultiLock) forceRecords(*lease.Hold) []string {
	out := make([]string, 0, len(m.keys))
	for _, g := range m.groups {
		for j := range g {
			out = append(out, g[j].Forced())
		}
	}
	return out
}
