// Package adminhook lets the root package give an admin.Admin the parts of
// a Client that admin cannot import: how a call to Redis is bounded by its
// context, and how a force-release is recorded when the script cannot
// write the audit entry itself.
package adminhook

import "context"

// Hooks are a Client's parts an Admin made by the root package uses.
type Hooks struct {
	// Call runs one call to Redis, bounded by ctx; nil runs it directly.
	Call func(ctx context.Context, call func() error) error
	// AuditForce records the force-release of key's hold with token ("" for
	// a key that named no holder) with a separate XADD; nil writes a plain
	// entry.
	AuditForce func(ctx context.Context, key, token string)
	// Cluster reports whether the client is a Redis Cluster's.
	Cluster bool
}

// Set installs h on a, an *admin.Admin; the admin package sets it at init.
var Set func(a any, h Hooks)
