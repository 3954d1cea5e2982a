package lock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// Info is what [Client.Inspect] and [Client.List] report of one lock, read
// in one script call, so its fields agree with each other.
type Info struct {
	Key string // the caller's key
	// Kind is the kind of lock held at the key, as its Redis value tells:
	// "mutex" (also a fair lock, whose holder is a plain mutex hold, a
	// MultiLock's member and Once's lock), "rwlock" (a [RWLock]: its
	// readers, or its one writer) or "semaphore" (one holder per permit
	// out); "" for a free key.
	Kind string
	// Holders has one entry per live hold: a re-entrant mutex one per nested
	// hold, a read-write lock one per reader (or its writer), a semaphore
	// one per permit, each with its own TTL left. Holds past their expiry
	// that Redis has not dropped yet are not shown.
	Holders []Holder
	// Waiters counts the live entries of a fair lock's queue ([WithFair]):
	// the Acquires waiting for the key, in every process, whose place has
	// not expired. It is 0 for other kinds, whose waiters poll and leave no
	// trace in Redis.
	Waiters int
	// Fence is the current fence: the holds' fence, else the key's fencing
	// counter; 0 when there is none.
	Fence int64
}

// Holder is one hold of a lock, as [Client.Inspect] shows it. The fields
// but Token and TTL come from the holder info its acquire wrote
// ([WithHolderInfo], [WithMetadata]) and are zero without it.
type Holder struct {
	Token    string        // the hold's token; a re-entrant hold's own id ("owner#uuid")
	Owner    string        // the owner id of [WithOwner]; "" for none
	Fence    int64         // the hold's fence; 0 without fencing
	TTL      time.Duration // time left on the hold; -1 for a key without an expiry
	Host     string        // the holder's host name
	PID      int           // the holder's process id
	Since    time.Time     // when it was acquired, by the Redis server's clock
	Metadata string        // the text of WithMetadata
}

// Inspect reports what the lock on key looks like now: its kind, holders
// (with their holder info), queued waiters and fence, in one script call.
// A free key gives an Info with Key set and nothing else, and a nil error.
// It uses the Client's prefix. It returns an error wrapping [ErrInvalid]
// for an empty key, a zero Client or a key whose Redis value is no lock
// kind's, or the Redis error. It changes nothing and is safe for
// concurrent use.
func (c *Client) Inspect(ctx context.Context, key string) (Info, error) {
	k, err := c.opKeys("inspect", key)
	if err != nil {
		return Info{}, err
	}
	return c.inspect(ctx, &k)
}

// opKeys returns the keys of key for operator verb op, or its error.
func (c *Client) opKeys(op, key string) (luascripts.Keys, error) {
	err := c.usable()
	if err == nil && key == "" {
		err = invalidf("empty key")
	}
	if err == nil && c.cluster && strings.HasPrefix(key, "}") {
		err = invalidf("key %q: on Redis Cluster a key must not start with '}'", key)
	}
	if err != nil {
		return luascripts.Keys{}, lease.NewOpError("lock", op, key, err)
	}
	return luascripts.NewKeys(c.cfg.prefix, key), nil
}

// usable returns the error of a zero Client or of its options.
func (c *Client) usable() error {
	if c.zero() {
		return errZeroClient
	}
	return c.err
}

func (c *Client) inspect(ctx context.Context, k *luascripts.Keys) (Info, error) {
	opErr := func(err error) error { return lease.NewOpError("lock", "inspect", k.User, err) }
	keys := append(k.InfoAcquireKeys(), k.QueueTimes())
	var v []any
	err := c.callBounded(ctx, func() (err error) {
		v, err = luascripts.Inspect.Run(ctx, c.rdb, keys).Slice()
		return err
	})
	if err != nil {
		return Info{}, opErr(err)
	}
	info, err := parseInspect(k.User, v)
	if err != nil {
		return Info{}, opErr(err)
	}
	return info, nil
}

// parseInspect reads inspect.lua's reply.
func parseInspect(key string, v []any) (Info, error) {
	info := Info{Key: key}
	if len(v) == 0 {
		return info, fmt.Errorf("lock: unexpected inspect reply %v", v)
	}
	info.Kind, _ = v[0].(string)
	if info.Kind == "" {
		return info, nil
	}
	if t, ok := strings.CutPrefix(info.Kind, "?"); ok {
		return Info{Key: key}, invalidf("key %q holds a Redis %s, no lock kind's", key, t)
	}
	if len(v) < 4 || (len(v)-4)%3 != 0 {
		return info, fmt.Errorf("lock: unexpected inspect reply of %d items", len(v))
	}
	fence, _ := v[2].(string)
	info.Fence, _ = strconv.ParseInt(fence, 10, 64)
	w, _ := v[3].(int64)
	info.Waiters = int(w)
	for i := 4; i+2 < len(v); i += 3 {
		h := Holder{}
		h.Token, _ = v[i].(string)
		s, _ := v[i+1].(string)
		parseHolder(&h, s)
		ms, _ := v[i+2].(int64)
		h.TTL = time.Duration(ms) * time.Millisecond
		if ms < 0 {
			h.TTL = -1
		}
		info.Holders = append(info.Holders, h)
	}
	return info, nil
}
