package lock

import (
	"context"

	"github.com/agentlock/lock/admin"
	"github.com/agentlock/lock/internal/adminhook"
	"github.com/agentlock/lock/internal/lease"
)

// Info is what [Client.Inspect] and [Client.List] report of one lock: the
// operators' view of package admin ([admin.Info]).
type Info = admin.Info

// Holder is one hold of a lock, as [Client.Inspect] shows it
// ([admin.Holder]).
type Holder = admin.Holder

// Inspect reports what the lock on key looks like now: its kind, holders
// (with their holder info), queued waiters and fence, in one script call,
// as [admin.Admin.Inspect] does under the Client's prefix. A free key gives
// an Info with Key set and nothing else, and a nil error. It returns an
// error wrapping [ErrInvalid] for an empty key, a zero Client or a key
// whose Redis value is no lock kind's, or the Redis error. It changes
// nothing and is safe for concurrent use.
func (c *Client) Inspect(ctx context.Context, key string) (Info, error) {
	a, err := c.admin("inspect", key)
	if err != nil {
		return Info{}, err
	}
	return a.Inspect(ctx, key)
}

// admin returns the Admin of c's prefix and audit stream, whose calls are
// bounded as c's are, or the error of operator verb op on key for a zero
// Client or one made with bad options.
func (c *Client) admin(op, key string) (*admin.Admin, error) {
	if err := c.usable(); err != nil {
		return nil, lease.NewOpError("lock", op, key, err)
	}
	return c.ops, nil
}

// newAdmin returns the Admin of c's verbs, made once by NewClient: under
// c's prefix and audit stream, its calls bounded as c's are.
func (c *Client) newAdmin() *admin.Admin {
	opts := []admin.Option{admin.WithPrefix(c.cfg.prefix)}
	if c.cfg.audit != "" {
		opts = append(opts, admin.WithAudit(c.cfg.audit, c.cfg.auditMax))
	}
	a := admin.New(c.rdb, opts...)
	adminhook.Set(a, adminhook.Hooks{Call: c.callBounded, AuditForce: c.auditForce, Cluster: c.cluster})
	return a
}

// usable returns the error of a zero Client or of its options.
func (c *Client) usable() error {
	if c.zero() {
		return errZeroClient
	}
	return c.err
}
