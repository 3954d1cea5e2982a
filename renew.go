package lock

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// renewChunk caps the renewals sent in one pipeline: one round trip renews
// up to this many holds of one group (see renewGroup).
const renewChunk = 500

// renewGroup is the holds one renewal call may carry: one backend and, on
// a Redis Cluster, one master. Each group is sent, watched and judged on
// its own, so a stalled master delays the holds on no other master: go-redis
// splits a cluster pipeline by node, but Exec returns only when every node
// has answered.
type renewGroup struct {
	be   backend
	node string // the master's address on a cluster; "" elsewhere
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

// send starts the renewal calls for the holds in due, already marked in
// flight: one goroutine per group and chunk of renewChunk holds.
func (r *renewal) send(due []*hold) {
	if len(due) == 0 {
		return
	}
	cl, _ := r.c.rdb.(*redis.ClusterClient)
	groups := map[renewGroup][]*hold{}
	for _, h := range due {
		g := renewGroup{be: h.l.be}
		if cl != nil {
			g.node = masterAddr(r.c.ctx, cl, h.l.k.Lock())
		}
		groups[g] = append(groups[g], h)
	}
	for g, hs := range groups {
		for len(hs) > 0 {
			n := min(len(hs), renewChunk)
			chunk := hs[:n:n]
			hs = hs[n:]
			r.c.wg.Add(1)
			go r.renew(g.be, chunk)
		}
	}
}

// renew sends one chunk. Its call must end before the earliest deadline in
// the chunk, or a dead server could hold it past the point where the hold
// has to be given up. The call carries that deadline in its context, but
// go-redis ignores context deadlines unless ContextTimeoutEnabled is set, so
// renew also watches the deadlines itself while the call is out.
func (r *renewal) renew(be backend, hs []*hold) {
	defer r.c.wg.Done()
	items := make([]renewItem, len(hs))
	r.mu.Lock()
	dl := hs[0].deadline
	for i, h := range hs {
		items[i] = renewItem{k: &h.l.k, token: h.token, ttl: h.ttl}
		dl = min(dl, h.deadline)
	}
	lowered := r.lowered
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.c.ctx, untilMono(dl)-time.Millisecond)
	defer cancel()
	st := make([]extendStatus, len(items))
	errs := make([]error, len(items))
	sent := monoNow()
	done := make(chan struct{})
	go func() {
		defer close(done)
		be.renew(ctx, items, st, errs)
	}()
	r.watch(hs, dl, lowered, done)
	r.apply(hs, items, sent, st, errs)
}

// watch waits until done closes. Meanwhile a hold of hs whose deadline
// passes is declared lost then, whatever the call is doing; an Extend that
// brings a deadline forward closes lowered, and watch looks again.
func (r *renewal) watch(hs []*hold, dl int64, lowered <-chan struct{}, done <-chan struct{}) {
	t := time.NewTimer(untilMono(dl))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		case <-lowered:
		}
		var ok bool
		if dl, lowered, ok = r.expireInFlight(hs); !ok {
			<-done // every hold of the chunk is lost: only the call is left
			return
		}
		t.Reset(untilMono(dl))
	}
}

// expireInFlight declares lost the holds of an unanswered chunk whose
// deadline has come, and returns the earliest deadline left, if any, and
// the channel that reports the next one brought forward.
func (r *renewal) expireInFlight(hs []*hold) (next int64, lowered <-chan struct{}, ok bool) {
	now := monoNow()
	var lost []*hold
	r.mu.Lock()
	lowered = r.lowered
	for _, h := range hs {
		if !h.registered {
			continue
		}
		if now >= h.deadline {
			h.registered = false
			lost = append(lost, h)
			continue
		}
		if !ok || h.deadline < next {
			next, ok = h.deadline, true
		}
	}
	r.mu.Unlock()
	for _, h := range lost {
		h.markLost(LossUnreachable, errRenewalTimeout)
	}
	return next, lowered, ok
}

// errRenewalTimeout is the error behind a loss whose renewal call was still
// unanswered at the hold's safety deadline.
var errRenewalTimeout = errors.New("lock: renewal unanswered at the safety deadline")

// apply records what a chunk found: confirmed holds get a new deadline and
// their next renewal; holds Redis no longer has are lost; failed ones are
// retried soon, or lost once their deadline is too close.
func (r *renewal) apply(hs []*hold, items []renewItem, sent int64, st []extendStatus, errs []error) {
	now := monoNow()
	closing := r.c.ctx.Err() != nil
	var lost []lossNote
	var failed []int
	r.mu.Lock()
	for i, h := range hs {
		h.inFlight = false
		if !h.registered {
			continue // released while the chunk was out
		}
		h.settledAt = max(h.settledAt, now)
		ttl := items[i].ttl
		switch {
		case errs[i] == nil && st[i] == extendOK:
			dl := later(sent, ttl-safetyMargin(ttl))
			renewAt := later(sent, h.ttl/3)
			if h.extDeadline != never {
				// An Extend may have landed after this renewal (see
				// extending): keep the earlier deadline, and once every
				// Extend is answered renew at once with the current TTL.
				dl = min(dl, h.extDeadline)
				if h.extending == 0 {
					renewAt = now
				}
			}
			h.sentAt, h.deadline, h.lastErr = sent, dl, nil
			h.next = nextFor(h, renewAt)
			heap.Push(&r.q, h)
		case errs[i] == nil:
			h.registered = false
			lost = append(lost, lossNote{h, lossReason(st[i], now, h.ttl, h.sentAt), nil})
		case closing:
			h.next = h.deadline
			heap.Push(&r.q, h)
		default:
			h.lastErr = errs[i]
			failed = append(failed, i)
			if now >= h.deadline-int64(time.Millisecond) {
				h.registered = false
				lost = append(lost, lossNote{h, LossUnreachable, errs[i]})
				continue
			}
			h.next = nextFor(h, min(later(now, retryInterval(h.ttl)), h.deadline))
			heap.Push(&r.q, h)
		}
	}
	r.mu.Unlock()
	r.wake()
	for _, i := range failed {
		h := hs[i]
		if o := h.l.cfg.observer; o != nil {
			o.Observe(Event{Kind: EventRenewalFailed, Key: h.l.k.User, Token: h.l.publicToken(h.token), Fence: h.fence, Err: errs[i]})
		}
		if lg := h.l.cfg.logger; lg != nil {
			lg.Warn("lock renewal failed", slog.String("key", h.l.k.User), slog.Any("err", errs[i]))
		}
	}
	for _, n := range lost {
		n.h.markLost(n.reason, n.err)
	}
}
