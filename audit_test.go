package lock_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// TestWithAudit: acquired, extended, released, force-released and lost
// events reach the stream with the hold's key, token, fence, owner, host,
// pid and metadata; one process's entries of one hold are in order.
func TestWithAudit(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		stream := keyFor(t) + ":audit"
		c := newClient(t, tg.newRDB(t), lock.WithAudit(stream, 1000), lock.WithMetadata("job-9"))
		op := newClient(t, tg.newRDB(t), lock.WithAudit(stream, 1000))
		key := keyFor(t)
		l := c.NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		must(t, "Extend()", l.Extend(ctx, time.Minute))
		must(t, "Release()", l.Release(ctx))
		first := l.Fence()
		must(t, "Acquire() again", l.Acquire(ctx))
		waitUntil(t, "the inbox subscription", func() bool { return lock.InboxReady(c) })
		must(t, "ForceRelease()", op.ForceRelease(ctx, key))
		waitClosed(t, l.Lost(), 10*time.Second, "Lost()")
		waitUntil(t, "six audit entries", func() bool { return tg.rdb.XLen(ctx, stream).Val() >= 6 })
		xs, err := tg.rdb.XRange(ctx, stream, "-", "+").Result()
		must(t, "XRANGE", err)
		var events []string
		for _, x := range xs {
			events = append(events, x.Values["event"].(string))
		}
		want := []string{"acquired", "extended", "released", "acquired", "force-released", "lost"}
		if len(events) != len(want) {
			t.Fatalf("audit events = %v, want %v", events, want)
		}
		for i := range 4 {
			if events[i] != want[i] {
				t.Fatalf("audit events = %v, want %v (the last two in either order)", events, want)
			}
		}
		host, _ := os.Hostname()
		e := xs[0].Values
		if e["key"] != key || e["token"] == "" || e["fence"] != strconv.FormatInt(first, 10) || e["host"] != host ||
			e["pid"] != strconv.Itoa(os.Getpid()) || e["metadata"] != "job-9" || e["time"] == "" {
			t.Fatalf("acquired entry = %v, want key, token, fence %d, host, pid, metadata, time", e, first)
		}
		for _, x := range xs[4:] {
			if x.Values["event"] == "lost" && x.Values["reason"] != "force-released" {
				t.Fatalf("lost entry = %v, want reason force-released", x.Values)
			}
		}
	})
}

// TestWithAudit_offAndInvalid: without WithAudit no stream is written;
// an empty stream name or a cap below 1 is ErrInvalid.
func TestWithAudit_offAndInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := miniTarget(t)
	c := newClient(t, tg.rdb)
	l := c.NewLock(keyFor(t))
	must(t, "Acquire()", l.Acquire(ctx))
	must(t, "Release()", l.Release(ctx))
	for _, k := range tg.mr.Keys() {
		if tg.mr.Type(k) == "stream" {
			t.Fatalf("stream %q written without WithAudit", k)
		}
	}
	for _, o := range []lock.Option{lock.WithAudit("", 10), lock.WithAudit("s", 0)} {
		wantErr(t, "Acquire() with a bad WithAudit", c.NewLock("k", o).Acquire(ctx), lock.ErrInvalid)
	}
}
