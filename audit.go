package lock

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
)

// The audit stream: with [WithAudit], every acquisition, release, Extend,
// loss and force-release of a lock is appended to a capped Redis stream,
// one entry per event, by the process that saw it. Fields: event
// ("acquired", "released", "extended", "lost", "force-released"), key,
// token, fence, owner, host, pid, metadata, time (the process's clock,
// RFC 3339 with nanoseconds), and for a loss its reason; the entry's ID
// carries the stream server's clock.
//
// Each entry is its own XADD (MAXLEN ~ maxLen), sent after the operation
// it reports, so the stream may live anywhere: on a Redis Cluster it is
// written on the master of its own slot, whatever the lock's. Entries of
// the caller's verbs (acquired, released, extended) are sent by the
// caller's goroutine before the verb returns, so one process's entries of
// one hold are in order; a loss's entry is sent in the background.
// Entries of different processes are in the order they reached the
// stream's server, not the order of the operations. A failed XADD is
// logged ([WithLogger]) and dropped: the audit never fails a lock
// operation. Renewals are not recorded.

// auditTimeout bounds one XADD sent in the background or for a caller
// whose context has ended.
const auditTimeout = time.Second

// WithAudit appends the locks' events to the Redis stream named stream,
// capped near maxLen entries (XADD MAXLEN ~): acquired, released,
// extended (by [Lock.Extend]; renewals are not recorded), lost (with its
// reason) and, for [Client.ForceRelease] on a Client with this option,
// force-released. Each entry carries the key, token, fence, owner, host,
// pid, metadata ([WithMetadata]) and the time. Each event costs one more
// XADD round trip (the caller's, for its own verbs). Default: none, at no
// cost. stream must not be empty and maxLen must be positive.
func WithAudit(stream string, maxLen int64) Option {
	return func(c *config) { c.auditSet, c.audit, c.auditMax = true, stream, maxLen }
}

// auditor writes one configuration's events to its stream.
type auditor struct {
	rdb      redis.UniversalClient
	eng      *lease.Engine
	stream   string
	max      int64
	owner    string
	metadata string
	logger   interface{ Warn(string, ...any) }
	// s, when set, is the settings whose scripts write their own entries
	// where the stream can share the key's slot (see settings.auditIn):
	// the auditor leaves those events to them. nil: it writes every event.
	s *settings
}

func (c *Client) auditor(cfg *config) *auditor {
	a := &auditor{rdb: c.rdb, eng: &c.eng, stream: cfg.audit, max: cfg.auditMax,
		owner: cfg.owner, metadata: cfg.metadata}
	if cfg.logger != nil {
		a.logger = cfg.logger
	}
	return a
}

// chain returns an observer that records e, then passes it to next.
func (a *auditor) chain(next func(lease.Event)) func(lease.Event) {
	return func(e lease.Event) {
		a.observe(e)
		if next != nil {
			next(e)
		}
	}
}

// observe records the events the audit keeps.
func (a *auditor) observe(e lease.Event) {
	var event, reason string
	switch {
	case e.Kind == lease.EventAcquire && e.Err == nil:
		event = "acquired"
	case e.Kind == lease.EventRelease && e.Err == nil:
		event = "released"
	case e.Kind == lease.EventExtend && e.Err == nil:
		event = "extended"
	case e.Kind == lease.EventLost:
		event = "lost"
		var le *LostError
		if errors.As(e.Err, &le) {
			reason = le.Reason.String()
		}
	default:
		return
	}
	if event != "lost" && a.s != nil && a.s.auditIn(a.s.keysOf(e.Key)) != nil {
		return // the operation's script wrote it (audit_script.go)
	}
	if e.Ctx == nil {
		// A loss, seen by the renewal loop or a pub/sub message: not
		// delayed by the XADD.
		a.eng.Go(func() { a.add(context.Background(), event, e.Key, e.Token, e.Fence, reason) })
		return
	}
	a.add(context.WithoutCancel(e.Ctx), event, e.Key, e.Token, e.Fence, reason)
}

// add sends one entry.
func (a *auditor) add(ctx context.Context, event, key, token string, fence int64, reason string) {
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	host, pid := processHostPID()
	vals := []any{"event", event, "key", key, "token", token, "fence", strconv.FormatInt(fence, 10),
		"owner", a.owner, "host", host, "pid", pid, "metadata", a.metadata,
		"time", time.Now().Format(time.RFC3339Nano)}
	if reason != "" {
		vals = append(vals, "reason", reason)
	}
	err := a.rdb.XAdd(ctx, &redis.XAddArgs{Stream: a.stream, MaxLen: a.max, Approx: true, Values: vals}).Err()
	if err != nil && a.logger != nil {
		a.logger.Warn("lock audit: entry dropped", "stream", a.stream, "event", event, "key", key, "err", err)
	}
}

// auditForce records a force-release of key (token "" for every holder)
// on c's audit stream, if c has one.
func (c *Client) auditForce(ctx context.Context, key, token string) {
	if c.cfg.audit == "" {
		return
	}
	c.auditor(&c.cfg).add(context.WithoutCancel(ctx), "force-released", key, token, 0, "")
}
