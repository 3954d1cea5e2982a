package redlock

import (
	"log/slog"
	"time"

	lock "github.com/agentlock/lock"

	"github.com/agentlock/lock/internal/lockutil"
)

// retryInterval is the wait after a failed renewal before the next try:
// TTL/12, at most 1s, so several tries fit before the validity runs out.
func retryInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/12, time.Millisecond), time.Second)
}

// scheduleRenewal arms the timer that starts h's renewal goroutine when the
// first renewal is due (TTL/3 after the acquire was sent; without the
// watchdog, when the validity runs out). A hold released before then, the
// usual short critical section, costs a timer instead of a goroutine that
// would be started and woken again only to return.
func (h *hold) scheduleRenewal() {
	h.mu.Lock()
	defer h.mu.Unlock()
	next := h.validUntil
	if h.l.cfg.watchdog {
		next = lockutil.MinTime(next, h.sentAt.Add(h.cappedLocked(h.ttl)/3))
	}
	h.starter = time.AfterFunc(time.Until(next), h.startRenewal)
}

// startRenewal starts h's renewal goroutine unless it was started already or
// h has ended; once Close has begun, it arms the loss at the end of validity
// instead. Extend calls it too, since it may move the first renewal earlier
// than the starter's timer.
func (h *hold) startRenewal() {
	h.mu.Lock()
	if h.renewing || h.stopped {
		h.mu.Unlock()
		return
	}
	h.renewing = true
	h.starter.Stop()
	h.mu.Unlock()
	if !h.l.c.goBackground(func() { h.l.renew(h) }) {
		h.abandon()
	}
}

// renew is the renewal goroutine of one hold, owned by the Client. With the
// watchdog on it extends the hold on every node at TTL/3, counting from when
// the last confirmed round was sent; a round confirmed by a quorum moves the
// validity on. The hold is lost when so many nodes lack our token that no
// quorum is possible, or when no quorum confirmed it before its validity ran
// out: every round's calls end by then, so the loss is signalled before any
// node could let another holder in. It returns at Release, loss or Close
// (after which the hold is reported lost when its validity runs out).
func (l *Lock) renew(h *hold) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var lastErr error
	var retryAt time.Time
	for {
		h.mu.Lock()
		// The validity counts on the capped TTL (see unanswered): renew
		// by that.
		sent, ttl, validUntil := h.sentAt, h.cappedLocked(h.ttl), h.validUntil
		h.mu.Unlock()
		next := validUntil
		if l.cfg.watchdog {
			renewAt := sent.Add(ttl / 3)
			if lastErr != nil {
				renewAt = retryAt
			}
			next = lockutil.MinTime(next, renewAt)
		}
		t.Reset(time.Until(next))
		select {
		case <-h.stop:
			return
		case <-l.c.ctx.Done():
			h.abandon()
			return
		case <-h.kick:
			lastErr = nil
			continue
		case <-t.C:
		}
		now := time.Now()
		if !now.Before(h.deadline()) {
			if lastErr != nil {
				h.markLost(lock.LossUnreachable, lastErr)
			} else {
				h.markLost(lock.LossExpired, nil)
			}
			return
		}
		if !l.cfg.watchdog {
			continue // an Extend moved the validity on
		}
		h.op.Lock()
		select {
		case <-h.stop:
			h.op.Unlock()
			return
		default:
		}
		h.mu.Lock()
		moved := !h.sentAt.Equal(sent)
		ttl, validUntil = h.ttl, h.validUntil
		eff := h.cappedLocked(ttl)
		h.mu.Unlock()
		if moved {
			h.op.Unlock() // an Extend was confirmed meanwhile: renewal is due later
			continue
		}
		start := time.Now()
		tl := l.extendRound(l.c.ctx, h, ttl, lockutil.MinTime(start.Add(nodeTimeoutFor(l.cfg.nodeTimeout, eff)), validUntil))
		if tl.failed > 0 {
			h.unanswered(ttl)
		}
		if tl.ok >= l.quorum {
			h.confirmed(start, ttl)
		}
		h.op.Unlock()
		switch {
		case tl.ok >= l.quorum:
			lastErr = nil
		case l.c.ctx.Err() != nil:
			h.abandon()
			return
		case tl.gone+tl.stolen > len(l.c.nodes)-l.quorum:
			h.markLost(l.lossReason(tl, h), nil)
			return
		default:
			lastErr = l.quorumError(tl)
			retryAt = time.Now().Add(retryInterval(eff))
			l.renewalFailed(h, lastErr)
		}
	}
}

func (l *Lock) renewalFailed(h *hold, err error) {
	if o := l.cfg.observer; o != nil {
		o.Observe(lock.Event{Kind: lock.EventRenewalFailed, Key: l.key, Token: h.token, Fence: h.fence, Err: err})
	}
	if lg := l.cfg.logger; lg != nil {
		lg.Warn("redlock renewal failed", slog.String("key", l.key), slog.Any("err", err))
	}
}
