package lease

import (
	"errors"
	"time"
)

// The renewal loop: every hold of the Engine is in it, from acquisition to
// release or loss, in a heap ordered by when the loop must next look at it
// (see the package comment). Due renewals go out in batches per Group
// (batch.go); a hold not confirmed by its deadline is declared lost then.

// retryInterval is the wait after a failed renewal before the next try:
// TTL/12, at most 1s, so several tries fit before the safety deadline.
func retryInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/12, time.Millisecond), time.Second)
}

// nextFor is when the loop must next look at h: renewAt if it renews h,
// with the watchdog or to check it (owesCheck). Callers hold e.mu.
func nextFor(h *Hold, renewAt int64) int64 {
	n := h.deadline
	if h.hd.pol.Watchdog || h.owesCheck() {
		n = min(n, renewAt)
	}
	return min(n, h.capAt())
}

// add puts a new hold into the loop, starting the loop on first use. cs,
// when not nil, is the force channel h listens on: add looks for a force
// message h may have missed (screen).
func (e *Engine) add(h *Hold, cs *channelState) {
	e.mu.Lock()
	// Close sets closed, then takes e.mu before it waits for the loop: an
	// add that sees closed false here has started the loop before that wait.
	if e.abandoned || e.closed.Load() {
		dl := h.deadline
		e.mu.Unlock()
		h.abandon(dl)
		return
	}
	h.registered = true
	h.next = nextFor(h, later(h.sentAt, h.capped(h.ttl)/3))
	if cs != nil {
		e.screen(h, cs)
	}
	e.q.push(h)
	e.lead, e.idle = between(h.sentAt, h.next), 0
	if !e.started {
		e.started = true
		e.wg.Add(1)
		go e.run()
	}
	// Wake the loop only if it would sleep past this hold's time: waking a
	// goroutine on every acquire costs more than the acquire's own work (a
	// futex call in the acquire, and the loop's goroutine run on another
	// CPU, perhaps Redis's). An idle loop sleeps only half a lead for that
	// reason (see run).
	early := h.next < e.armed
	e.mu.Unlock()
	if early {
		e.wake()
	}
}

func (e *Engine) wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// remove takes h out of the loop; a renewal in flight for it is ignored.
func (e *Engine) remove(h *Hold) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h.index >= 0 {
		e.q.remove(int(h.index))
	}
	h.registered = false
}

// lose takes h out of the loop and reports it lost, Redis having said st
// of it; byRelease as for Hold.lose.
func (e *Engine) lose(h *Hold, st Status, byRelease bool) {
	e.mu.Lock()
	if h.index >= 0 {
		e.q.remove(int(h.index))
	}
	h.registered = false
	reason := h.lossReason(st, monoNow())
	e.mu.Unlock()
	h.lose(reason, nil, byRelease)
}

// Left returns how long h stays valid from now: until its safety deadline,
// or 0 once it ended or its deadline passed.
func (e *Engine) Left(h *Hold) time.Duration {
	if !h.Active() {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return max(untilMono(h.deadline), 0)
}

// extending records an Extend to ttl, sent at sentAt, before it goes out;
// while a renewal of h is out it records nothing and returns a channel
// closed when renewals are next applied, and the Extend waits for that
// first (Handle.beginExtend). Writes of one hold are thus sent one at a
// time: a renewal carries the TTL the hold had when it went out, and
// landing after an Extend it would set that TTL again; the renewal loop
// likewise holds a renewal back while an Extend is out (tick), unless the
// Extend stays unanswered until close to the deadline.
//
// Redis keeps the TTL of whichever write landed last, and a reply does not
// say which that was. So a write (acquire, renewal or Extend) confirmed by
// its reply moves the deadline to its own (sent + ttl - margin) only when
// it was sent after every other write was answered and none is out;
// otherwise (Extends of one hold overlapping each other, or a renewal sent
// past an Extend unanswered too long) the hold keeps
// the earliest deadline any of them could have set and renews at once,
// with the current TTL, once all are answered: that renewal lands last.
// An Extend's deadline counts from the moment it is sent: a shorter TTL
// lowers the hold's deadline before the call goes out, whatever the
// Extend's own reply later says.
//
// A write whose call failed is taken to have landed, if at all, before its
// failure was reported: a write sent afterwards overrides it. A kind whose
// calls may land later (redlock's nodes) reports the Extend settled only
// once they cannot.
func (e *Engine) extending(h *Hold, ttl time.Duration, sentAt time.Time) (wait <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h.registered && h.inFlight {
		if e.applied == nil {
			e.applied = make(chan struct{})
		}
		return e.applied
	}
	// A write of unknown outcome may still set a shorter TTL (see ttlCap).
	dl := h.hd.pol.deadlineFor(mono(sentAt), h.capped(ttl))
	if !h.registered {
		if e.abandoned && dl < h.deadline {
			// Renewal has stopped; the timer Close armed must fire by the
			// lower deadline.
			h.deadline = dl
			h.rearm(dl)
		}
		return nil
	}
	x := h.more()
	x.extending++
	x.extDeadline = min(x.extDeadline, dl)
	e.lower(h, dl)
	return nil
}

// rearm moves the timer Close armed to deadline dl.
func (h *Hold) rearm(dl int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if x := h.x.Load(); x != nil && x.afterFn != nil {
		x.afterFn.Reset(untilMono(dl))
	}
}

// lower brings h's deadline down to dl if it is later, and makes whatever
// watches h look again. Callers hold e.mu.
func (e *Engine) lower(h *Hold, dl int64) {
	if dl >= h.deadline {
		return
	}
	h.deadline = dl
	switch {
	case h.inFlight:
		close(e.lowered) // every renewal in flight looks at its deadlines again
		e.lowered = make(chan struct{})
	case h.index >= 0:
		h.next = min(h.next, dl)
		e.q.fix(int(h.index))
		if dl < e.armed {
			e.wake()
		}
	}
}

// errLateExtend is the error behind a loss whose Extend was confirmed only
// after the deadline the Extend itself set.
var errLateExtend = errors.New("lock: extend confirmed after its own safety deadline")

// extended records the answer to an Extend to ttl sent at sentAt: ok if
// Redis confirmed it, which later renewals then keep; otherwise the call
// failed and the TTL stays as it was. See extending.
func (e *Engine) extended(h *Hold, ttl time.Duration, sentAt time.Time, ok, unknown bool) {
	if e.extendedLocked(h, ttl, sentAt, ok, unknown) {
		// Confirmed only after its own safety deadline: the TTL it set may
		// have run out in Redis already.
		h.markLost(LossExpired, errLateExtend)
	}
}

// extendedLocked is extended under e.mu; it reports a hold to be declared
// lost.
func (e *Engine) extendedLocked(h *Hold, ttl time.Duration, sentAt time.Time, ok, unknown bool) (late bool) {
	sent, now := mono(sentAt), monoNow()
	e.mu.Lock()
	defer e.mu.Unlock()
	if unknown || !ok {
		// It may still land, after later writes: from now on no deadline
		// counts on a longer TTL than ttl.
		h.unknownWrite(ttl)
	}
	if !h.registered {
		return false
	}
	dl := h.hd.pol.deadlineFor(sent, h.capped(ttl))
	if ok && now >= dl {
		if h.index >= 0 {
			e.q.remove(int(h.index))
		}
		h.registered = false
		return true
	}
	x := h.more()
	x.extending--
	alone := h.settledAt < sent && !h.inFlight && x.extending == 0
	h.settledAt = max(h.settledAt, now)
	if ok {
		h.ttl = ttl
	}
	if ok && alone {
		// Sent after every other write was answered, and none is out: this
		// one landed last.
		h.sentAt, h.deadline, x.lastErr, x.extDeadline = sent, dl, nil, never
		renewAt := later(sent, h.capped(ttl)/3)
		if !h.checkedBy(sent, now) {
			renewAt = now
		}
		h.next = nextFor(h, renewAt)
	} else {
		e.lower(h, dl)
		if h.inFlight || x.extending > 0 {
			return false // the last answer to come renews (see apply)
		}
		// With the watchdog off too: a renewal (a check, owe) answered
		// before this Extend may have landed after it.
		x.owed, x.checkFrom = true, now
		h.next = nextFor(h, now)
	}
	if h.index >= 0 {
		e.q.fix(int(h.index))
	}
	if h.next < e.armed {
		e.wake()
	}
	return false
}

// maxIdle is how many times in a row an idle renewal loop wakes after half
// a lead before it sleeps an hour (until a hold comes): about 16 renewal
// intervals of a Client that holds nothing, then no wake-ups at all.
const maxIdle = 16

func (e *Engine) run() {
	defer e.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		e.mu.Lock()
		now := monoNow()
		wait := time.Hour
		switch {
		case len(e.q) > 0:
			wait = max(between(now, e.q[0].next), 0)
		case e.lead > 0 && e.idle < maxIdle:
			// No hold now, as between the holds of one goroutine that
			// acquires and releases in turn: a loop asleep for an hour
			// would be woken by the next acquire, and find its hold gone
			// again, acquire after acquire. Half a lead keeps the loop due
			// before a hold of the same TTL sent from now on.
			e.idle++
			wait = e.lead / 2
		}
		e.armed = later(now, wait)
		e.mu.Unlock()
		t.Reset(wait)
		select {
		case <-e.ctx.Done():
			return
		case <-e.kick:
			continue
		case <-t.C:
		}
		e.tickSafely()
	}
}

// tickSafely is tick, recovering and logging a panic (an Observer or a
// logger told of a loss): the loop goes on.
func (e *Engine) tickSafely() {
	defer e.Survive("renewal loop")
	e.tick()
}

// lossNote is a loss found under e.mu, signalled after it is released.
type lossNote struct {
	h      *Hold
	reason Reason
	err    error
}

// leftNote is a hold requeued after Close and its deadline, read under
// e.mu; its timer is armed after e.mu is released (see requeue).
type leftNote struct {
	h        *Hold
	deadline int64
}

// tick handles every hold whose time has come: losses past their deadline
// or cap, and renewals due now or soon (a renewal due within TTL/12 is sent
// early, so that holds acquired close together share round trips).
func (e *Engine) tick() {
	now := monoNow()
	var lost []lossNote
	var due []*Hold
	e.mu.Lock()
	for len(e.q) > 0 {
		h := e.q[0].h
		if e.q[0].next > now && !(renewalDue(h) && between(now, h.next) <= h.capped(h.ttl)/12) {
			break
		}
		e.q.pop()
		switch {
		case now >= h.deadline:
			h.registered = false
			reason, err := LossExpired, h.lastErr()
			if err != nil {
				reason = failedReason(err)
			}
			lost = append(lost, lossNote{h, reason, err})
		case now >= h.capAt():
			h.registered = false
			lost = append(lost, lossNote{h, LossMaxHold, nil})
		case extendOut(h) && between(now, lastCall(h)) > h.capped(h.ttl)/12:
			// An Extend is out: a renewal sent now would carry the TTL it
			// replaces and might land after it. The Extend's answer
			// schedules the next renewal (extended); only an Extend still
			// unanswered a third of a TTL before the deadline lets one go
			// then, rather than cost the hold. (Within TTL/12 of that
			// time, the renewal goes now, as any renewal due that soon.)
			h.next = lastCall(h)
			e.q.push(h)
		default:
			h.inFlight = true
			if x := h.x.Load(); x != nil && x.extending == 0 {
				// Every Extend is answered: this renewal is sent after them
				// all, so none can land after it (see extending).
				x.extDeadline = never
			}
			due = append(due, h)
		}
	}
	var f *flight
	if len(due) > 0 {
		f = &flight{hs: due}
		if e.flights == nil {
			e.flights = map[*flight]struct{}{}
		}
		e.flights[f] = struct{}{}
	}
	e.mu.Unlock()
	e.signalLost(lost)
	e.send(f)
}

// signalLost reports each note's hold lost, from a goroutine of the
// renewal loop's: an Observer or a logger that panics while told of one
// loss (recovered and logged) keeps no other hold from its report.
func (e *Engine) signalLost(notes []lossNote) {
	for _, n := range notes {
		e.signalOne(n)
	}
}

func (e *Engine) signalOne(n lossNote) {
	defer e.Survive("loss report")
	n.h.markLost(n.reason, n.err)
}

// extendOut reports whether an Extend of h is out. Callers hold e.mu.
func extendOut(h *Hold) bool {
	x := h.x.Load()
	return x != nil && x.extending > 0
}

// lastCall is when a renewal of h goes out even though an Extend of it is
// out: a third of its TTL before its deadline. Callers hold e.mu.
func lastCall(h *Hold) int64 {
	return h.deadline - int64(h.capped(h.ttl)/3)
}

// renewalDue reports whether h's next event is a renewal (not its deadline
// or cap). Callers hold e.mu.
func renewalDue(h *Hold) bool {
	return h.hd.pol.Watchdog && h.next < h.deadline && h.next < h.capAt()
}

// abandon runs at Close, after the loop has stopped: every hold left is no
// longer renewed, so each gets a timer that reports it lost at its deadline.
func (e *Engine) abandon() {
	e.mu.Lock()
	e.abandoned = true
	hs := make([]*Hold, len(e.q))
	for i, x := range e.q {
		hs[i] = x.h
	}
	dls := make([]int64, len(hs))
	for i, h := range hs {
		h.index, h.registered = -1, false
		dls[i] = h.deadline
	}
	e.q = nil
	e.mu.Unlock()
	for i, h := range hs {
		h.abandon(dls[i])
	}
}
