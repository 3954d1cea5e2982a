package lock

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"
)

// renewChunk caps the renewals sent in one pipeline: one round trip renews
// up to this many holds (per node, on a cluster).
const renewChunk = 500

// renewal is the Client's one renewal loop. Every hold of the Client is in
// it, from acquisition to release or loss, in a heap ordered by when the
// loop must next look at it: its renewal (every TTL/3, with the watchdog
// on), its WithMaxHold cap, or its safety deadline. Due renewals are sent
// together in pipelined batches; a hold not confirmed by its deadline is
// declared lost then, before Redis could let anyone else in.
type renewal struct {
	c         *Client
	mu        sync.Mutex
	q         holdHeap
	kick      chan struct{} // wakes the loop when an earlier event arrives
	armed     int64         // when the loop's timer fires next (see mono)
	started   bool
	abandoned bool // Close has run: holds only get deadline timers
}

func (r *renewal) init(c *Client) {
	r.c = c
	r.kick = make(chan struct{}, 1)
	r.armed = math.MinInt64 // no timer yet: the loop looks at the heap when it starts
}

// retryInterval is the wait after a failed renewal before the next try:
// TTL/12, at most 1s, so several tries fit before the safety deadline.
func retryInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/12, time.Millisecond), time.Second)
}

// nextFor is when the loop must next look at h. Callers hold r.mu.
func nextFor(h *hold, renewAt int64) int64 {
	n := h.deadline
	if h.l.cfg.watchdog {
		n = min(n, renewAt)
	}
	return min(n, h.capAt)
}

// add puts a new hold into the loop, starting the loop on first use.
func (r *renewal) add(h *hold) {
	r.mu.Lock()
	// Close sets closed, then takes r.mu before it waits for the loop: an
	// add that sees closed false here has started the loop before that wait.
	if r.abandoned || r.c.closed.Load() {
		r.mu.Unlock()
		h.abandon()
		return
	}
	h.registered = true
	h.next = nextFor(h, later(h.sentAt, h.ttl/3))
	heap.Push(&r.q, h)
	if !r.started {
		r.started = true
		r.c.wg.Add(1)
		go r.run()
	}
	// Wake the loop only if it would sleep past this hold's time: waking a
	// goroutine on every acquire costs more than the acquire's own work.
	early := h.next < r.armed
	r.mu.Unlock()
	if early {
		r.wake()
	}
}

func (r *renewal) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// remove takes h out of the loop; a renewal in flight for it is ignored.
func (r *renewal) remove(h *hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.index >= 0 {
		heap.Remove(&r.q, h.index)
	}
	h.registered = false
}

// reason names the loss of h, which Redis reported as st.
func (r *renewal) reason(h *hold, st extendStatus) LossReason {
	r.mu.Lock()
	defer r.mu.Unlock()
	return lossReason(st, monoNow(), h.ttl, h.sentAt)
}

// extended records a successful Extend sent at sentAt with a new ttl, which
// later renewals keep.
func (r *renewal) extended(h *hold, ttl time.Duration, sentAt time.Time) {
	sent := mono(sentAt)
	r.mu.Lock()
	h.ttl = ttl
	dl := later(sent, ttl-safetyMargin(ttl))
	if !h.registered {
		r.mu.Unlock()
		return
	}
	if h.inFlight {
		// A renewal sent with the old TTL may reach Redis before or after
		// this extend: trust neither alone (see apply).
		h.extDeadline = min(h.extDeadline, dl)
		r.mu.Unlock()
		return
	}
	if h.sentAt > sent {
		// A renewal sent after this extend, with the old TTL, was confirmed
		// first: it may have reached Redis last. Keep the earlier deadline
		// and renew at once with the new TTL.
		h.deadline = min(h.deadline, dl)
		h.next = nextFor(h, monoNow())
	} else {
		h.sentAt, h.deadline, h.lastErr = sent, dl, nil
		h.next = nextFor(h, later(sent, ttl/3))
	}
	if h.index >= 0 {
		heap.Fix(&r.q, h.index)
	}
	early := h.next < r.armed
	r.mu.Unlock()
	if early {
		r.wake()
	}
}

func (r *renewal) run() {
	defer r.c.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		r.mu.Lock()
		now := monoNow()
		wait := time.Hour
		if len(r.q) > 0 {
			wait = max(between(now, r.q[0].next), 0)
		}
		r.armed = later(now, wait)
		r.mu.Unlock()
		t.Reset(wait)
		select {
		case <-r.c.ctx.Done():
			return
		case <-r.kick:
			continue
		case <-t.C:
		}
		r.tick()
	}
}

// lossNote is a loss found under r.mu, signalled after it is released.
type lossNote struct {
	h      *hold
	reason LossReason
	err    error
}

// tick handles every hold whose time has come: losses past their deadline
// or cap, and renewals due now or soon (a renewal due within TTL/12 is sent
// early, so that holds acquired close together share round trips).
func (r *renewal) tick() {
	now := monoNow()
	var lost []lossNote
	batches := map[backend][]*hold{}
	r.mu.Lock()
	for len(r.q) > 0 {
		h := r.q[0]
		if h.next > now && !(r.renewalDue(h) && between(now, h.next) <= h.ttl/12) {
			break
		}
		heap.Pop(&r.q)
		switch {
		case now >= h.deadline:
			h.registered = false
			reason := LossExpired
			if h.lastErr != nil {
				reason = LossUnreachable
			}
			lost = append(lost, lossNote{h, reason, h.lastErr})
		case now >= h.capAt:
			h.registered = false
			lost = append(lost, lossNote{h, LossMaxHold, nil})
		default:
			h.inFlight = true
			batches[h.l.be] = append(batches[h.l.be], h)
		}
	}
	r.mu.Unlock()
	for _, n := range lost {
		n.h.markLost(n.reason, n.err)
	}
	for be, hs := range batches {
		for len(hs) > 0 {
			n := min(len(hs), renewChunk)
			chunk := hs[:n:n]
			hs = hs[n:]
			r.c.wg.Add(1)
			go r.renew(be, chunk)
		}
	}
}

// renewalDue reports whether h's next event is a renewal (not its deadline
// or cap). Callers hold r.mu.
func (r *renewal) renewalDue(h *hold) bool {
	return h.l.cfg.watchdog && h.next < h.deadline && h.next < h.capAt
}

// renew sends one batch. Its call must end before the earliest deadline in
// the batch, or a dead server could hold it past the point where the hold
// has to be given up. The call carries that deadline in its context, but
// go-redis ignores context deadlines unless ContextTimeoutEnabled is set, so
// renew also watches the deadlines itself while the call is out: a hold whose
// deadline passes is declared lost then, whatever the call is doing.
func (r *renewal) renew(be backend, hs []*hold) {
	defer r.c.wg.Done()
	items := make([]renewItem, len(hs))
	r.mu.Lock()
	dl := hs[0].deadline
	for i, h := range hs {
		items[i] = renewItem{k: &h.l.k, token: h.token, ttl: h.ttl}
		dl = min(dl, h.deadline)
	}
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
	t := time.NewTimer(untilMono(dl))
	defer t.Stop()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-t.C:
			next, ok := r.expireInFlight(hs)
			if !ok {
				<-done // every hold of the batch is lost: only the call is left
				waiting = false
				break
			}
			t.Reset(untilMono(next))
		}
	}
	r.apply(hs, items, sent, st, errs)
}

// expireInFlight declares lost the holds of an unanswered batch whose
// deadline has come, and returns the earliest deadline left, if any.
func (r *renewal) expireInFlight(hs []*hold) (next int64, ok bool) {
	now := monoNow()
	var lost []*hold
	r.mu.Lock()
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
	return next, ok
}

// errRenewalTimeout is the error behind a loss whose renewal call was still
// unanswered at the hold's safety deadline.
var errRenewalTimeout = errors.New("lock: renewal unanswered at the safety deadline")

// apply records what a batch found: confirmed holds get a new deadline and
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
			continue // released while the batch was out
		}
		ttl := items[i].ttl
		switch {
		case errs[i] == nil && st[i] == extendOK:
			dl := later(sent, ttl-safetyMargin(ttl))
			renewAt := later(sent, h.ttl/3)
			if h.extDeadline != never {
				// An Extend ran while this renewal was out; either may have
				// reached Redis last. Keep the earlier deadline and renew at
				// once with the extended TTL.
				dl, renewAt = min(dl, h.extDeadline), now
				h.extDeadline = never
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
			o.Observe(Event{Kind: EventRenewalFailed, Key: h.l.k.user, Token: h.l.publicToken(h.token), Fence: h.fence, Err: errs[i]})
		}
		if lg := h.l.cfg.logger; lg != nil {
			lg.Warn("lock renewal failed", slog.String("key", h.l.k.user), slog.Any("err", errs[i]))
		}
	}
	for _, n := range lost {
		n.h.markLost(n.reason, n.err)
	}
}

// abandon runs at Close, after the loop has stopped: every hold left is no
// longer renewed, so each gets a timer that reports it lost at its deadline.
func (r *renewal) abandon() {
	r.mu.Lock()
	r.abandoned = true
	hs := make([]*hold, len(r.q))
	copy(hs, r.q)
	r.q = nil
	for _, h := range hs {
		h.index, h.registered = -1, false
	}
	r.mu.Unlock()
	for _, h := range hs {
		h.abandon()
	}
}

// abandon arms the timer that reports h lost at its deadline, renewal having
// stopped.
func (h *hold) abandon() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return
	}
	h.afterFn = time.AfterFunc(untilMono(h.deadline), func() {
		h.markLost(LossExpired, ErrClosed)
	})
}
