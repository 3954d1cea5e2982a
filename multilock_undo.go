package lock

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// A MultiLock's slot groups live on different shards of a cluster or a
// Ring, so no single script takes, extends or releases all of them: each
// group is one call. Whenever the calls of one token part ways — an
// attempt took some groups and not the next, an Extend or a renewal found
// one group gone or taken — every group the token may still hold is
// released before the outcome is reported; a hold lost any other way (a
// force-release message, its safety deadline) has its members released in
// the background. A group whose release fails (there, or in Release) is
// released once more in the background; should that fail too, its members
// expire by their TTL. A token is never used again once released this way
// (each acquire attempt has its own, and a hold's token is the hold's
// alone), so a release that lands late frees nobody else's hold.

// backOut ends a failed acquire attempt with token that may hold the
// slot groups [0, n): it releases them and returns a. When the release
// fails (the groups it could not confirm are then released again in the
// background), a refusal (a.Err nil) becomes the release's error: the
// attempt cannot say that it holds nothing.
func (m *MultiLock) backOut(ctx context.Context, token string, n int, a lease.Attempt) lease.Attempt {
	if n == 0 {
		return a
	}
	if err := m.releaseOrLater(ctx, token, m.groups[:n]); err != nil && a.Err == nil {
		a = lease.Attempt{Err: err, Final: !retryable(err)}
	}
	return a
}

// releaseOnLoss arranges that, should the current hold be lost (a member
// force-released, the safety deadline passed, a member found gone or
// taken), every member still ours is released in the background: the
// other members would otherwise stay held until their TTL ran out, for a
// hold its owner was told is gone.
func (m *MultiLock) releaseOnLoss() {
	h := m.hd.Hold()
	if h == nil {
		return
	}
	token := h.Token()
	h.OnLost(func(error) {
		m.mu.Lock()
		done := m.dropped == token
		m.mu.Unlock()
		if !done {
			m.releaseLater(token, m.groups)
		}
	})
}

// releaseLost releases every member of a lost hold with token that is
// still ours, as backOut does, before the loss is reported; once every
// group answered, the hold's loss sends no second release.
func (m *MultiLock) releaseLost(ctx context.Context, token string) {
	if m.releaseOrLater(ctx, token, m.groups) == nil {
		m.mu.Lock()
		m.dropped = token
		m.mu.Unlock()
	}
}

// releaseOrLater releases token's members in groups, one call per group in
// one pipeline, and returns the first failure. The groups whose call
// failed are released again in the background (releaseLater). A member
// gone or held by someone else is no failure: it is not ours.
func (m *MultiLock) releaseOrLater(ctx context.Context, token string, groups [][]luascripts.Keys) error {
	cmds := m.sendRelease(ctx, token, groups)
	failed := m.failed(cmds, groups)
	if len(failed) == 0 {
		return nil
	}
	m.releaseLater(token, failed)
	_, err := worst("release", cmds)
	return err
}

// failed returns the groups whose release, cmds[i] for groups[i], failed.
func (m *MultiLock) failed(cmds []*redis.Cmd, groups [][]luascripts.Keys) [][]luascripts.Keys {
	var out [][]luascripts.Keys
	for i, cmd := range cmds {
		n, err := cmd.Int64()
		if _, err = checkStatus("release", n, err); err != nil {
			out = append(out, groups[i])
		}
	}
	return out
}

// releaseLater releases token's members in groups on a goroutine of the
// Client that Close waits for (or, once Close has begun, on one of its
// own), bounded by the undo timeout.
func (m *MultiLock) releaseLater(token string, groups [][]luascripts.Keys) {
	e := m.pol.Engine
	run := func() {
		ctx, cancel := context.WithTimeout(context.Background(), m.pol.UndoTimeout)
		defer cancel()
		m.sendRelease(ctx, token, groups)
	}
	if !e.Go(run) {
		go func() {
			defer e.Survive("multi-lock release")
			run()
		}()
	}
}

// renewed reads one multi_extend.lua status per slot group of one hold:
// stolen if any group is held by someone else, else gone if any group is
// gone, whatever the other groups answered (the hold is lost either way);
// else the first error, else extended.
func renewed(cmds []*redis.Cmd) (extendStatus, error) {
	st := extendOK
	var first error
	for _, cmd := range cmds {
		n, err := cmd.Int64()
		s, err := checkStatus("renewal", n, err)
		switch {
		case err != nil:
			if first == nil {
				first = err
			}
		case s == extendStolen || s == extendGone && st == extendOK:
			st = s
		}
	}
	if st == extendOK && first != nil {
		return 0, first
	}
	return st, nil
}
