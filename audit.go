package lock

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/adminhook"
	"github.com/agentlock/lock/internal/lease"
)

// The audit stream: with [WithAudit], every acquisition, release, Extend,
// loss and force-release of a lock is appended to a capped Redis stream
// (XADD MAXLEN ~ maxLen), one entry per event. Fields: event ("acquired",
// "released", "extended", "lost", "force-released"), key, token, fence,
// owner, host, pid, metadata, time (RFC 3339), and for a loss its reason.
//
// Two paths write the entries:
//
//   - In the operation's own script, when the stream can live beside the
//     lock's key: always on one node (a failover/Sentinel client too); on a
//     Redis Cluster when the stream's hash slot is the key's, which a
//     stream named with the key's tag gives ("audit:{session:42}" for key
//     "session:42": one stream per hash tag). The acquire, release and
//     [Lock.Extend] of a mutex (plain or re-entrant), of a read-write
//     lock's readers and writer and of a semaphore's permits, a handoff
//     (the releaser's "released" and the waiter's "acquired", in one
//     script), a [Client.Once] lock's acquire and release, and
//     [Client.ForceRelease] of any kind (one entry per hold removed, with
//     that hold's token, fence and, when it wrote holder info, its owner,
//     host, pid and metadata) write their entry in the same script,
//     atomically with the operation and only when it succeeded: a failed
//     acquire, or the release of a lost hold, writes none, and an
//     operation whose reply was lost has its entry iff it took effect. The
//     stream's order is then the order of the operations on that key. time
//     is the Redis server's clock (TIME), in UTC with microseconds.
//   - Otherwise, by a separate XADD the process sends after the operation:
//     on a Cluster with the stream in another slot, on a Ring, and for the
//     fair lock ([WithFair]), the multi-lock and replica-acknowledged holds
//     ([WithReplicaAck]) wherever the stream is (a fair release hands the
//     key to the queue's head, maybe another process's hold, whose owner
//     the script does not know; a multi-lock's hold is one event over keys
//     that its scripts take per slot group; a replica-acknowledged acquire
//     may be undone after its script). The caller's goroutine sends it
//     before the verb returns, so one process's entries of one hold are in
//     order; entries of different processes are in the order they reached
//     the stream's server, not the order of the operations. time is the
//     process's clock. A failed XADD is logged ([WithLogger]) and dropped:
//     the audit never fails a lock operation.
//
// Losses are seen only by the holder's process: a "lost" entry is always a
// separate XADD, sent in the background (bounded by a second). Renewals
// write no entry: one per hold every TTL/3 would flood the stream (10 000
// holds at the default TTL make 1 000 a second) and say little — a hold's
// life is bracketed by its acquired and its released or lost entry, and
// [Observer] sees each renewal ([EventRenewed]) for metrics.
//
// Off (the default), the scripts and their arguments are exactly those
// without audit: it costs nothing.

// auditTimeout bounds one XADD sent in the background or for a caller
// whose context has ended.
const auditTimeout = time.Second

// WithAudit appends the locks' events to the Redis stream named stream,
// capped near maxLen entries (XADD MAXLEN ~): acquired, released,
// extended (by [Lock.Extend]; renewals are not recorded), lost (with its
// reason) and force-released ([Client.ForceRelease]), each with the key,
// token, fence, owner, host, pid, metadata ([WithMetadata]) and time.
// Where the stream shares the lock's hash slot (one node, or a Cluster
// stream named with the key's {tag}), the operation's own script writes the
// entry, atomically with it and in its order; otherwise, and for losses,
// the process sends a separate XADD after the operation, and a failed one
// is logged and dropped. Default: none, at no cost. stream must not be
// empty and maxLen must be positive ([ErrInvalid]). See
// docs/operations.md#the-audit-stream and docs/design/audit.md.
func WithAudit(stream string, maxLen int64) Option {
	return func(c *config) { c.auditSet, c.audit, c.auditMax = true, stream, maxLen; c.given |= optAudit }
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
	token, hold := adminhook.AuditToken(token)
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	host, pid := processHostPID()
	vals := []any{"event", event, "key", key, "token", token, "fence", strconv.FormatInt(fence, 10),
		"owner", a.owner, "host", host, "pid", pid, "metadata", a.metadata,
		"time", time.Now().Format(time.RFC3339Nano)}
	if reason != "" {
		vals = append(vals, "reason", reason)
	}
	if hold != "" {
		vals = append(vals, "hold", hold)
	}
	err := a.rdb.XAdd(ctx, &redis.XAddArgs{Stream: a.stream, MaxLen: a.max, Approx: true, Values: vals}).Err()
	if err != nil && a.logger != nil {
		a.logger.Warn("lock audit: entry dropped", "stream", a.stream, "event", event, "key", key, "err", err)
	}
}

// auditForce records the force-release of key's hold with token ("" for a
// key that named no holder) on c's audit stream, if c has one.
func (c *Client) auditForce(ctx context.Context, key, token string) {
	if c.cfg.audit == "" {
		return
	}
	c.auditor(&c.cfg).add(context.WithoutCancel(ctx), "force-released", key, token, 0, "")
}
