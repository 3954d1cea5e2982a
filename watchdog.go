package lock

import (
	"container/heap"
	"math"
	"sync"
	"time"
)

// renewal is the Client's one renewal loop. Every hold of the Client is in
// it, from acquisition to release or loss, in a heap ordered by when the
// loop must next look at it: its renewal (every TTL/3, with the watchdog
// on), its WithMaxHold cap, or its safety deadline. Due renewals are sent
// together in pipelined batches, one per backend and cluster master (see
// renew.go); a hold not confirmed by its deadline is declared lost then,
// before Redis could let anyone else in.
type renewal struct {
	c         *Client
	mu        sync.Mutex
	q         holdHeap
	kick      chan struct{} // wakes the loop when an earlier event arrives
	armed     int64         // when the loop's timer fires next (see mono)
	started   bool
	abandoned bool // Close has run: holds only get deadline timers
	// lowered is closed, and replaced, when the deadline of a hold in a
	// renewal call is brought forward, so the call's watch looks again.
	lowered chan struct{}
}

func (r *renewal) init(c *Client) {
	r.c = c
	r.kick = make(chan struct{}, 1)
	r.lowered = make(chan struct{})
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
	// Close sets closed, then takes r.mu (in abandon) before it waits for
	// the loop: an add that sees neither has started the loop before that
	// wait, and abandon finds its hold in the heap.
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
	return lossReason(st, monoNow(), h.capped(h.ttl), h.sentAt)
}

// extending records an Extend to ttl, sent at sentAt, before it goes out.
//
// While calls that set different TTLs overlap, Redis keeps the TTL of
// whichever landed last, and a reply does not say which that was. So a
// write (acquire, renewal or Extend) confirmed by its reply moves the
// deadline to its own (sent + ttl - margin) only when it was sent after
// every other write was answered and none is out; otherwise the hold keeps
// the earliest deadline any of them could have set and renews at once, with
// the current TTL, once all are answered: that renewal lands last.
// An Extend's deadline counts from the moment it is sent: a shorter TTL
// lowers the hold's deadline before the call goes out, whatever the
// renewal in flight or the Extend's own reply later say, and wakes the
// watch over the renewal in flight (see renew).
//
// A write whose call failed after it may have reached Redis may still land
// at any later time, after writes sent since: from then on no deadline
// counts on a TTL longer than the one it carries (see hold.unanswered).
func (r *renewal) extending(h *hold, ttl time.Duration, sentAt time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !h.registered {
		return
	}
	dl := h.capDeadline(mono(sentAt), ttl)
	h.extending++
	h.extDeadline = min(h.extDeadline, dl)
	r.lower(h, dl)
}

// lower brings h's deadline down to dl if it is later, and makes whatever
// watches h look again. Callers hold r.mu.
func (r *renewal) lower(h *hold, dl int64) {
	if dl >= h.deadline {
		return
	}
	h.deadline = dl
	switch {
	case h.inFlight:
		close(r.lowered) // every renewal in flight looks at its deadlines again
		r.lowered = make(chan struct{})
	case h.index >= 0:
		h.next = min(h.next, dl)
		heap.Fix(&r.q, h.index)
		if dl < r.armed {
			r.wake()
		}
	}
}

// extended records the answer to an Extend to ttl sent at sentAt: err nil
// if Redis confirmed it, which later renewals then keep; otherwise the call
// failed and the TTL stays as it was, but if it may have reached Redis it
// may still land, and caps the hold's deadlines from now on. See extending.
func (r *renewal) extended(h *hold, ttl time.Duration, sentAt time.Time, err error) {
	ok, unknown := err == nil, err != nil && sent(err)
	sent, now := mono(sentAt), monoNow()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !h.registered {
		return
	}
	if unknown {
		h.unanswered(ttl)
	}
	dl := h.capDeadline(sent, ttl)
	h.extending--
	alone := h.settledAt < sent && !h.inFlight && h.extending == 0
	h.settledAt = max(h.settledAt, now)
	if ok {
		h.ttl = ttl
	}
	if ok && alone {
		// Sent after every other write was answered, and none is out: this
		// one landed last.
		h.sentAt, h.deadline, h.lastErr, h.extDeadline = sent, dl, nil, never
		h.next = nextFor(h, later(sent, h.capped(ttl)/3))
	} else {
		r.lower(h, dl)
		if h.inFlight || h.extending > 0 {
			return // the last answer to come renews (see apply)
		}
		h.next = nextFor(h, now)
	}
	if h.index >= 0 {
		heap.Fix(&r.q, h.index)
	}
	if h.next < r.armed {
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
	var due []*hold
	r.mu.Lock()
	for len(r.q) > 0 {
		h := r.q[0]
		if h.next > now && !(r.renewalDue(h) && between(now, h.next) <= h.capped(h.ttl)/12) {
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
			if h.extending == 0 {
				// Every Extend is answered: this renewal is sent after them
				// all, so none can land after it (see extending).
				h.extDeadline = never
			}
			due = append(due, h)
		}
	}
	r.mu.Unlock()
	for _, n := range lost {
		n.h.markLost(n.reason, n.err)
	}
	r.send(due)
}

// renewalDue reports whether h's next event is a renewal (not its deadline
// or cap). Callers hold r.mu.
func (r *renewal) renewalDue(h *hold) bool {
	return h.l.cfg.watchdog && h.next < h.deadline && h.next < h.capAt
}

// abandon runs at Close, before it waits for the loop and the renewal
// calls out: no hold is renewed any more, so each in the heap gets a timer
// that reports it lost at its deadline. A hold whose renewal call is out
// stays with that call's watch, and apply gives it its timer when the call
// returns (see requeue).
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

// requeue puts h back in the heap, or, once Close has abandoned the heap,
// appends it to left, for the caller to arm its deadline timer (abandon)
// after releasing r.mu. Callers hold r.mu.
func (r *renewal) requeue(h *hold, left *[]*hold) {
	if r.abandoned {
		h.registered = false
		*left = append(*left, h)
		return
	}
	heap.Push(&r.q, h)
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
