package admin

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// Inspect reports what the lock on key looks like now: its kind, holders
// (with their holder info), queued waiters and fence, in one script call.
// A free key gives an Info with Key set and nothing else, and a nil error.
// It returns an error wrapping lock.ErrInvalid for an empty key, a nil
// Admin or a key whose Redis value is no lock kind's, or the Redis error.
// It changes nothing.
func (a *Admin) Inspect(ctx context.Context, key string) (Info, error) {
	k, err := a.opKeys("inspect", key)
	if err != nil {
		return Info{}, err
	}
	return a.inspect(ctx, &k)
}

func (a *Admin) inspect(ctx context.Context, k *luascripts.Keys) (Info, error) {
	opErr := func(err error) error { return lease.NewOpError("lock", "inspect", k.User, err) }
	keys := append(k.InfoAcquireKeys(), k.QueueTimes())
	var v []any
	err := a.call(ctx, func() (err error) {
		v, err = luascripts.Inspect.Run(ctx, a.rdb, keys).Slice()
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
		return Info{Key: key}, lease.Invalidf("key %q holds a Redis %s, no lock kind's", key, t)
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
