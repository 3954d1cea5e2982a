package lock

import (
	"context"
	"iter"
)

// List yields the [Info] of every lock whose key matches pattern (a Redis
// glob over the caller's keys: "session:*"; "" for every lock), as
// [Client.Inspect] reports it, under the Client's prefix: see
// [admin.Admin.List]. It walks the keyspace with SCAN, never KEYS, so
// Redis is never blocked for long: on a Redis Cluster every master in
// turn, on a Ring every shard. It skips the locks' companion keys and keys
// freed between the SCAN and their inspection; none is reported twice.
//
// A failed call yields a zero Info (Key set when it concerns one key) and
// the error, and List goes on with the next key or node; stopping the
// range loop stops it. A zero Client yields one error wrapping
// [ErrInvalid]. The iterator may be ranged over more than once, each time
// afresh; it is not safe to range over it from several goroutines at once.
func (c *Client) List(ctx context.Context, pattern string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		a, err := c.admin("list", pattern)
		if err != nil {
			yield(Info{}, err)
			return
		}
		for info, err := range a.List(ctx, pattern) {
			if !yield(info, err) {
				return
			}
		}
	}
}
