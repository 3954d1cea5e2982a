package faulttest

import (
	"context"
	"slices"
	"testing"

	lock "github.com/agentlock/lock"
)

// held is a hold of any kind as the suite drives it: a *lock.Lock (mutex,
// fair lock, reader, writer, permit) or a *lock.MultiLock.
type held interface {
	Acquire(ctx context.Context) error
	Release(ctx context.Context) error
	Lost() <-chan struct{}
	LostErr() error
	Token() string
}

var (
	_ held = (*lock.Lock)(nil)
	_ held = (*lock.MultiLock)(nil)
)

// member is one key of a hold with the fence the hold carries on it.
type member struct {
	key   string
	fence int64
}

// members returns the keys l covers, in order, each with l's fence on it:
// one for a Lock, every member for a MultiLock (each key of a MultiLock is
// a mutex, and the history checks each key apart).
func members(l held) []member {
	switch x := l.(type) {
	case *lock.MultiLock:
		var ms []member
		for _, k := range x.Keys() {
			ms = append(ms, member{k, x.Fence(k)})
		}
		return ms
	case *lock.Lock:
		return []member{{x.Key(), x.Fence()}}
	case candidate:
		return []member{{x.Name(), x.Term()}}
	}
	return nil
}

// acquireOps is l's hold as history operations: an acquire of each member.
func acquireOps(l held, client string, mode byte, call, ret int64) []histOp {
	var ops []histOp
	for _, m := range members(l) {
		ops = append(ops, histOp{Op: 'A', Key: m.key, Client: client, Mode: mode, Fence: m.fence, Call: call, Ret: ret})
	}
	return ops
}

// endOps is the end of l's hold as history operations: a release of each
// member.
func endOps(l held, client string, call, ret int64) []histOp {
	var ops []histOp
	for _, m := range members(l) {
		ops = append(ops, histOp{Op: 'R', Key: m.key, Client: client, Call: call, Ret: ret})
	}
	return ops
}

// acquire runs l.Acquire for client and records the hold.
func (h *history) acquire(ctx context.Context, l held, client string, mode byte) error {
	call := now()
	if err := l.Acquire(ctx); err != nil {
		return err
	}
	h.add(acquireOps(l, client, mode, call, now())...)
	return nil
}

// release runs l.Release for client and records the hold's end.
func (h *history) release(ctx context.Context, l held, client string) error {
	call := now()
	err := l.Release(ctx)
	h.add(endOps(l, client, call, now())...)
	return err
}

// enterAll enters the referee's section of every member of l.
func enterAll(rc *refClient, l held) error {
	for _, m := range members(l) {
		if _, err := rc.enter(m.key, m.fence); err != nil {
			return err
		}
	}
	return nil
}

// writeAll offers client's write to every member of l with its fence and
// records them; it returns how many the store accepted.
func (h *history) writeAll(rc *refClient, l held, client string) (int, error) {
	n := 0
	for _, m := range members(l) {
		ok, err := h.write(rc, m.key, client, m.fence)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// widenEnds is widenEnd for every member of a hold of client over keys.
func widenEnds(ops []histOp, keys []string, client string, from, until int64) []histOp {
	for _, k := range slices.Sorted(slices.Values(keys)) {
		ops = widenEnd(ops, k, client, from, until)
	}
	return ops
}

// enterAndWrite dials the referee for client, a holder of l: it enters
// the section of every member and writes to each with its fence, failing
// t unless the store accepts every write. The connection closes at t's
// end; the caller exits the sections.
func (h *history) enterAndWrite(t *testing.T, ref *referee, l held, client string) *refClient {
	t.Helper()
	rc, err := dialReferee(ref.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.close() })
	if err := enterAll(rc, l); err != nil {
		t.Fatal(err)
	}
	ms := members(l)
	if n, err := h.writeAll(rc, l, client); err != nil || n != len(ms) {
		t.Fatalf("%s's writes (fences %v): %d of %d accepted, %v; want all accepted", client, ms, n, len(ms), err)
	}
	return rc
}

// leave exits client's sections of every member of l and releases l,
// failing t if the release does.
func (h *history) leave(t *testing.T, rc *refClient, l held, client string) {
	t.Helper()
	for _, m := range members(l) {
		_ = rc.exit(m.key)
	}
	if err := h.release(context.Background(), l, client); err != nil {
		t.Errorf("%s: Release() error = %v", client, err)
	}
}
