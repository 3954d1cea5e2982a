package lease

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// BatchSize caps the holds of one renewal call: one round trip renews up
// to this many holds of one Group.
const BatchSize = 500

// send starts the renewal calls for the holds of f (nil: none), already
// marked in flight: one goroutine per Group and chunk of BatchSize holds.
func (e *Engine) send(f *flight) {
	if f == nil {
		return
	}
	due := f.hs
	// Due holds come in runs of one group (one per Client off a cluster):
	// the map is consulted only when the group changes.
	type batch struct {
		g  Group
		hs []*Hold
	}
	var batches []batch
	index := map[Group]int{}
	last := -1
	for _, h := range due {
		g := e.groupOf(h)
		if last < 0 || batches[last].g != g {
			i, ok := index[g]
			if !ok {
				i = len(batches)
				batches = append(batches, batch{g: g})
				index[g] = i
			}
			last = i
		}
		batches[last].hs = append(batches[last].hs, h)
	}
	for _, b := range batches {
		f.left += (len(b.hs) + BatchSize - 1) / BatchSize
	}
	for _, b := range batches {
		g, hs := b.g, b.hs
		for len(hs) > 0 {
			n := min(len(hs), BatchSize)
			chunk := hs[:n:n]
			hs = hs[n:]
			e.wg.Add(1)
			go e.renew(g, chunk, f)
		}
	}
}

// landed counts one chunk of f applied; after the last, f's holds are all
// back in the heap, or lost, and f leaves Engine.flights.
func (e *Engine) landed(f *flight) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if f.left--; f.left == 0 {
		delete(e.flights, f)
	}
}

// groupOf returns the renewal batch h joins now. A Group lookup that
// panics (a cluster client's slot lookup runs go-redis code and hooks)
// puts h in a batch of its own whose renewal fails with that panic: h is
// retried and, while the lookups keep panicking, lost at its deadline,
// rather than left out of the loop.
func (e *Engine) groupOf(h *Hold) (g Group) {
	defer func() {
		if v := recover(); v != nil {
			g = panickedGroup{Recovered(e.Logger, "renewal batch lookup", v)}
		}
	}()
	return h.hd.pol.Group(e.ctx, h)
}

// panickedGroup is the batch of holds whose Group lookup panicked with
// err: its renewal sends nothing and fails with err.
type panickedGroup struct{ err error }

// Renew fails every hold with g's error.
func (g panickedGroup) Renew(_ context.Context, _ []*Hold, _ []time.Duration, out []Outcome) {
	for i := range out {
		out[i] = Outcome{Err: g.err}
	}
}

// renew sends one chunk. Its call must end before the earliest deadline in
// the chunk, or a dead server could hold it past the point where the hold
// has to be given up. The call carries that deadline in its context, but
// go-redis ignores context deadlines unless ContextTimeoutEnabled is set, so
// renew also watches the deadlines itself while the call is out.
func (e *Engine) renew(g Group, hs []*Hold, f *flight) {
	defer e.wg.Done()
	defer e.Survive("renewal") // an Observer or logger of apply's
	defer e.landed(f)
	ttls := make([]time.Duration, len(hs))
	e.mu.Lock()
	dl := hs[0].deadline
	for i, h := range hs {
		ttls[i] = h.ttl
		dl = min(dl, h.deadline)
	}
	lowered := e.lowered
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(e.ctx, untilMono(dl)-time.Millisecond)
	defer cancel()
	out := make([]Outcome, len(hs))
	sent := monoNow()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer e.renewPanicked(out)
		g.Renew(ctx, hs, ttls, out)
	}()
	e.watch(hs, dl, lowered, done)
	e.apply(hs, ttls, sent, out)
}

// renewPanicked, deferred by the goroutine of a renewal call, recovers a
// panic of the call (a go-redis hook, say) and makes it the call's failure
// for every hold of it: Failed, of unknown outcome, with an error that
// matches ErrPanicked. The holds are retried like those of a call that got
// no answer, and lost at their deadline if the calls keep panicking.
func (e *Engine) renewPanicked(out []Outcome) {
	v := recover()
	if v == nil {
		return
	}
	err := Recovered(e.Logger, "renewal call", v)
	for i := range out {
		out[i] = Outcome{Status: Failed, Err: err, Unknown: true}
	}
}

// watch waits until done closes. Meanwhile a hold of hs whose deadline
// passes is declared lost then, whatever the call is doing; an Extend that
// brings a deadline forward closes lowered, and watch looks again.
func (e *Engine) watch(hs []*Hold, dl int64, lowered <-chan struct{}, done <-chan struct{}) {
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
		if dl, lowered, ok = e.expireInFlight(hs); !ok {
			<-done // every hold of the chunk is lost: only the call is left
			return
		}
		t.Reset(untilMono(dl))
	}
}

// expireInFlight declares lost the holds of an unanswered chunk whose
// deadline has come, and returns the earliest deadline left, if any, and
// the channel that reports the next one brought forward.
func (e *Engine) expireInFlight(hs []*Hold) (next int64, lowered <-chan struct{}, ok bool) {
	now := monoNow()
	var lost []lossNote
	e.mu.Lock()
	lowered = e.lowered
	for _, h := range hs {
		if !h.registered {
			continue
		}
		if now >= h.deadline {
			h.registered = false
			lost = append(lost, lossNote{h, failedReason(h.lastErr()), ErrRenewalTimeout})
			continue
		}
		if !ok || h.deadline < next {
			next, ok = h.deadline, true
		}
	}
	e.mu.Unlock()
	e.signalLost(lost)
	return next, lowered, ok
}

// ErrRenewalTimeout is the error behind a loss whose renewal call was still
// unanswered at the hold's safety deadline.
var ErrRenewalTimeout = errors.New("lock: renewal unanswered at the safety deadline")

// errNoAnswer is the error of a Failed outcome its Group gave no reason for.
var errNoAnswer = errors.New("lock: renewal got no answer for this hold")

// apply records what a chunk found: confirmed holds get a new deadline and
// their next renewal; holds Redis no longer has are lost; failed ones are
// retried soon, or lost once their deadline is too close.
func (e *Engine) apply(hs []*Hold, ttls []time.Duration, sent int64, out []Outcome) {
	now := monoNow()
	closing := e.ctx.Err() != nil
	var lost []lossNote
	var failed []int
	var left []leftNote // after Close: timers at their deadlines, not the heap
	var renewed []renewNote
	e.mu.Lock()
	for i, h := range hs {
		h.inFlight = false
		if !h.registered {
			continue // released while the chunk was out
		}
		h.settledAt = max(h.settledAt, now)
		o := out[i]
		if o.Status == Failed || o.Unknown {
			// It may still land, after later writes (see ttlCap).
			h.unknownWrite(ttls[i])
		}
		if o.Status == Failed && o.Err == nil {
			o.Err = errNoAnswer
			out[i] = o
		}
		switch {
		case o.Status == Confirmed:
			renewed = h.noteRenewed(renewed, now, ttls[i])
			e.confirmed(h, ttls[i], sent, now, &left)
		case o.Status != Failed:
			h.registered = false
			lost = append(lost, lossNote{h, h.lossReason(o.Status, now), nil})
		case closing:
			h.next = h.deadline
			e.requeue(h, &left)
		default:
			x := h.more()
			x.lastErr = lastFailure(x.lastErr, o.Err)
			failed = append(failed, i)
			if now >= h.deadline-int64(time.Millisecond) {
				h.registered = false
				lost = append(lost, lossNote{h, failedReason(x.lastErr), x.lastErr})
				continue
			}
			h.next = nextFor(h, min(later(now, retryInterval(h.capped(h.ttl))), h.deadline))
			e.requeue(h, &left)
		}
	}
	if e.applied != nil {
		close(e.applied) // the Extends waiting for these renewals go on
		e.applied = nil
	}
	e.mu.Unlock()
	e.wake()
	// The losses are reported even if the Observer or the logger panics
	// below (renew recovers it).
	defer e.signalLost(lost)
	for _, n := range left {
		n.h.abandon(n.deadline)
	}
	for _, i := range failed {
		h, err := hs[i], out[i].Err
		p := h.hd.pol
		p.observe(h.hd.Keys.User, Event{Kind: EventRenewalFailed, Token: h.token, Fence: h.fence, Err: err})
		if lg := p.Logger; lg != nil {
			lg.Warn(p.Pkg+" renewal failed", slog.String("key", h.hd.Keys.User), slog.Any("err", err))
		}
	}
	observeRenewed(renewed)
}

// confirmed records a renewal to ttl, sent at sent, that Redis confirmed
// for h: its new deadline and its next renewal. Callers hold e.mu.
func (e *Engine) confirmed(h *Hold, ttl time.Duration, sent, now int64, left *[]leftNote) {
	dl := h.hd.pol.deadlineFor(sent, h.capped(ttl))
	renewAt := later(sent, h.capped(h.ttl)/3)
	if x := h.x.Load(); x != nil {
		if x.extDeadline != never {
			// An Extend may have landed after this renewal (see
			// extending): keep the earlier deadline, and once every Extend
			// is answered renew at once with the current TTL.
			dl = min(dl, x.extDeadline)
			if x.extending == 0 {
				// With the watchdog off too: this renewal (a check, owe)
				// may have set the older TTL.
				renewAt, x.owed, x.checkFrom = now, true, now
			}
		}
		x.lastErr = nil
	}
	if !h.checkedBy(sent, now) {
		renewAt = now // sent before the check was owed (Engine.owe)
	}
	h.sentAt, h.deadline = sent, dl
	h.next = nextFor(h, renewAt)
	e.requeue(h, left)
}

// requeue puts h, whose renewal call has returned, back into the loop; once
// Close has abandoned the loop, into left instead, for a timer at its
// deadline (Hold.abandon, which the caller runs after releasing e.mu).
// Callers hold e.mu.
func (e *Engine) requeue(h *Hold, left *[]leftNote) {
	if e.abandoned {
		h.registered = false
		*left = append(*left, leftNote{h, h.deadline})
		return
	}
	e.q.push(h)
}
