package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
)

// keys names the Redis keys of one lock: the storage layout every lock
// kind shares (see luascripts.Keys).
type keys = luascripts.Keys

// acquireResult is the outcome of one acquire attempt.
type acquireResult struct {
	ok    bool
	fence int64
	pttl  time.Duration // the holder's remaining TTL when !ok
}

// extendStatus is what Redis said of a hold we asked to extend or renew.
type extendStatus int

const (
	extendOK     extendStatus = 1  // still ours, TTL reset
	extendGone   extendStatus = 0  // the key is gone
	extendStolen extendStatus = -1 // someone else holds it
)

// backend carries out the lock's operations against Redis: by Lua script
// (scriptBackend) or without scripting (watchBackend).
type backend interface {
	acquire(ctx context.Context, k *keys, token string, ttl time.Duration) (acquireResult, error)
	// release drops our hold (for re-entrant holds, one level of it) and
	// reports extendOK, or says why it could not: extendGone, extendStolen.
	release(ctx context.Context, k *keys, token string) (extendStatus, error)
	extend(ctx context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error)
	// pttl returns errGone or errNotOurs when the hold is not ours.
	pttl(ctx context.Context, k *keys, token string) (time.Duration, error)
	// renew extends many holds at once; it fills st and errs, one per item.
	renew(ctx context.Context, items []renewItem, st []extendStatus, errs []error)
}

// renewItem is one hold the renewal loop asks to extend.
type renewItem struct {
	k     *keys
	token string
	ttl   time.Duration
}

// errNotOurs and errGone are what pttl reports of a hold that is not ours:
// someone else holds the key, or nobody does.
var (
	errNotOurs = errors.New("lock: hold not ours")
	errGone    = errors.New("lock: hold gone")
)

// scripter is what the script backend needs of a go-redis client: it
// builds its own EVAL and EVALSHA commands, so sending them is enough.
type scripter interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Pipeline() redis.Pipeliner
}

var (
	_ scripter = (*redis.Client)(nil)
	_ scripter = (*redis.ClusterClient)(nil)
	_ scripter = (redis.UniversalClient)(nil)
)

// scriptBackend runs each operation as one script call (ReleaseScript).
type scriptBackend struct {
	rdb       scripter
	co        *lanes // nil: every call is sent on its own (WithCoalescing(false))
	reentrant bool
	fencing   bool
	info      bool        // holder info: its calls carry the holder-info hash (holderinfo.go)
	pub       *shardedPub // nil or classic: scripts publish with PUBLISH
	// unanswered holds, by token, the pipelines still out with an acquire
	// whose caller left before the reply (see coalescer.do); n counts them.
	// A release of such a token waits for the pipeline first, so that the
	// undo of an acquire of unknown outcome never lands before the acquire.
	mu         sync.Mutex
	unanswered map[string]<-chan struct{}
	n          atomic.Int32
	// evaled marks the scripts this backend has sent whole once. Until then
	// a call uses EVAL, which also caches the script on the server, so even
	// the first acquire on a fresh server is one round trip; afterwards it
	// is EVALSHA, and EVAL again for a call that meets NOSCRIPT (a restarted
	// server, another cluster node).
	evaled [numTexts]atomic.Bool
}

// Indexes into scriptBackend.evaled and scriptText, in the order of
// luascripts.All and then luascripts.SemAll (the semaphore's, which
// semBackend sends through a scriptBackend).
const (
	scriptAcquire = iota
	scriptRelease
	scriptExtend
	scriptPTTL
	scriptHandoff
	scriptSemAcquire
	scriptSemRelease
	scriptSemExtend
	scriptSemPTTL
	scriptSemHandoff
	numScripts
	// The audited variant of script i (luascripts.AuditSources) is script
	// numScripts+i: see auditScript.
	numTexts = 2 * numScripts
)

// auditScript is the index of script i's audited variant.
func auditScript(i int) int { return numScripts + i }

// scriptText holds each script's source (for EVAL) and SHA1 (for EVALSHA),
// boxed once: converting a string to an interface allocates. Then their
// audited variants (none for a TTL).
var scriptText = func() (t [numTexts]struct{ src, sha any }) {
	srcs := slices.Concat(luascripts.Sources, luascripts.SemSources)
	for i, s := range slices.Concat(luascripts.All, luascripts.SemAll) {
		t[i].src, t[i].sha = srcs[i], s.Hash()
	}
	for i, s := range slices.Concat(luascripts.All, luascripts.SemAll) {
		if a, src := luascripts.Audited(s); a != nil {
			t[auditScript(i)].src, t[auditScript(i)].sha = src, a.Hash()
		}
	}
	return t
}()

// shardedText is scriptText with the sharded variant (SPUBLISH) of each
// script that publishes (see shardedPub).
var shardedText = func() (t [numTexts]struct{ src, sha any }) {
	for i, x := range scriptText {
		if x.src == nil {
			continue
		}
		t[i].src = luascripts.ShardedText(x.src.(string))
		t[i].sha = luascripts.ShardedText(x.sha.(string))
	}
	return t
}()

// scriptCmd is a script call. Every script of ours replies with one
// integer, which an IntCmd keeps without boxing it.
type scriptCmd struct{ *redis.IntCmd }

// Int64 returns the reply.
func (c scriptCmd) Int64() (int64, error) { return c.Result() }

// run sends script i with keys and args and returns its reply.
func (b *scriptBackend) run(ctx context.Context, i int, keys []string, args ...any) scriptCmd {
	if b.evaled[i].Load() {
		cmd := b.send(ctx, i, false, keys, args)
		if err := cmd.Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return cmd
		}
	}
	cmd := b.send(ctx, i, true, keys, args)
	var rerr redis.Error
	if err := cmd.Err(); err == nil || errors.Is(err, redis.Nil) || errors.As(err, &rerr) {
		b.evaled[i].Store(true) // the server answered: it has the script now
	}
	return cmd
}

// leaves marks the scripts whose call may return at the end of its ctx
// while the shared pipeline carrying it is still out (see coalescer): an
// acquire (its undo waits for the pipeline, see unanswered), a release (the
// hold is out of renewal already) and a TTL. An extend or handoff waits for
// its reply: the renewal loop counts on no write of a hold landing after
// its call returned, and a handed-over hold must reach its waiter.
var leaves = [numScripts]bool{scriptAcquire: true, scriptRelease: true, scriptPTTL: true,
	scriptSemAcquire: true, scriptSemRelease: true, scriptSemPTTL: true}

// publishes marks the scripts that publish on the notify channel, whose
// sharded variant replaces them when wake-ups are sharded.
var publishes = func() (p [numTexts]bool) {
	for i := range p {
		p[i] = scriptText[i] != shardedText[i]
	}
	return p
}()

// sendOnce marks the scripts go-redis must not resend (luascripts.OnceCmd).
var sendOnce = [numScripts]bool{scriptRelease: true, scriptHandoff: true, scriptSemRelease: true, scriptSemHandoff: true}

// send builds one EVAL or EVALSHA command and sends it, through the
// Client's coalescer unless coalescing is off. A release or handoff goes
// as a luascripts.OnceCmd. The command, its argument slice and the OnceCmd
// take one allocation (scriptCall, onceCall) when the arguments fit.
func (b *scriptBackend) send(ctx context.Context, i int, eval bool, keys []string, args []any) scriptCmd {
	var (
		a   []any
		cmd *redis.IntCmd
		c   redis.Cmder
	)
	if sendOnce[i%numScripts] {
		oc := new(onceCall)
		a, cmd = oc.once.Argv[:0], &oc.cmd
		oc.once.Cmder, c = cmd, &oc.once
	} else {
		sc := new(scriptCall)
		a, cmd = sc.argv[:0], &sc.cmd
		c = cmd
	}
	if n := 3 + len(keys) + len(args); n > cap(a) {
		a = make([]any, 0, n)
	}
	text := &scriptText
	if publishes[i] && b.pub.sharded(ctx) {
		text = &shardedText
	}
	if eval {
		a = append(a, "eval", text[i].src)
	} else {
		a = append(a, "evalsha", text[i].sha)
	}
	a = append(a, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	*cmd = *redis.NewIntCmd(ctx, append(a, args...)...)
	if b.co == nil {
		_ = b.rdb.Process(ctx, c) // the error is in cmd
		return scriptCmd{cmd}
	}
	if err := b.co.lane(ctx, keys[0]).do(ctx, c, leaves[i%numScripts]); err != nil {
		// The call left without its reply; cmd may still get one from a
		// pipeline, which nobody reads.
		cmd = redis.NewIntCmd(ctx)
		cmd.SetErr(err)
	}
	return scriptCmd{cmd}
}

// scriptCall is a command of send with room for the arguments of a mutex's
// acquire (three, two keys, four).
type scriptCall struct {
	cmd  redis.IntCmd
	argv [9]any
}

// onceCall is a command of send that go-redis must not resend; its
// OnceCmd has room for the arguments of a mutex's release.
type onceCall struct {
	once luascripts.OnceCmd
	cmd  redis.IntCmd
}

// Script flags, boxed once: converting a string to an interface allocates.
var argOne, argZero, argEmpty any = "1", "0", ""

func flag(b bool) any {
	if b {
		return argOne
	}
	return argZero
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// ttlArg is the script argument for ttl in milliseconds. Converting an
// int64 to an interface allocates, so the boxed value of the default TTL is
// kept, and those of the last few other TTLs used (a process uses few).
func ttlArg(d time.Duration) any {
	if d == DefaultTTL {
		return defaultTTLArg
	}
	m := ms(d)
	slot := &ttlArgs[uint64(m)*0x9e3779b97f4a7c15>>58]
	if b := slot.Load(); b != nil && b.ms == m {
		return b.v
	}
	b := &boxedTTL{ms: m, v: m}
	slot.Store(b)
	return b.v
}

// boxedTTL is a TTL in milliseconds and the same boxed; ttlArgs keeps one
// per slot, the slot picked by a hash of the TTL.
type boxedTTL struct {
	ms int64
	v  any
}

var ttlArgs [64]atomic.Pointer[boxedTTL]

var defaultTTLArg any = ms(DefaultTTL)

func (b *scriptBackend) acquire(ctx context.Context, k *keys, token string, ttl time.Duration) (acquireResult, error) {
	return b.acquireInfo(ctx, k, token, ttl, nil)
}

// acquireInfo is acquire, writing holder info (nil: none; see
// holderinfo.go).
func (b *scriptBackend) acquireInfo(ctx context.Context, k *keys, token string, ttl time.Duration, info any) (acquireResult, error) {
	var n int64
	var err error
	if info != nil {
		n, err = b.run(ctx, scriptAcquire, k.InfoAcquireKeys(),
			token, ttlArg(ttl), flag(b.reentrant), flag(b.fencing), argEmpty, info).Int64()
	} else {
		n, err = b.run(ctx, scriptAcquire, k.AcquireKeys(),
			token, ttlArg(ttl), flag(b.reentrant), flag(b.fencing)).Int64()
	}
	return b.readAcquire(token, n, err)
}

// readAcquire reads the reply of an acquire with token (acquire.lua,
// sem_acquire.lua). A call left unanswered is recorded, so that its undo
// waits for the pipeline carrying it.
func (b *scriptBackend) readAcquire(token string, n int64, err error) (acquireResult, error) {
	if err != nil {
		var u unansweredError
		if errors.As(err, &u) {
			b.leftUnanswered(token, u.settled)
		}
		return acquireResult{}, err
	}
	ok, fence, left := luascripts.AcquireReply(n)
	return acquireResult{ok: ok, fence: fence, pttl: left}, nil
}

func (b *scriptBackend) release(ctx context.Context, k *keys, token string) (extendStatus, error) {
	if err := b.awaitAcquire(ctx, token); err != nil {
		return 0, err
	}
	n, err := b.run(ctx, scriptRelease, b.releaseKeys(k),
		token, flag(b.reentrant)).Int64()
	return releaseStatus(n, err)
}

// releaseStatus reads release.lua's reply.
func releaseStatus(n int64, err error) (extendStatus, error) {
	if n == 2 { // one re-entrant level dropped
		n = 1
	}
	return checkStatus("release", n, err)
}

// checkStatus turns a script's integer reply into an extendStatus, refusing
// a value no script of ours returns.
func checkStatus(op string, n int64, err error) (extendStatus, error) {
	if err != nil {
		return 0, err
	}
	if n < -1 || n > 1 {
		return 0, fmt.Errorf("lock: unexpected %s reply %d", op, n)
	}
	return extendStatus(n), nil
}

func (b *scriptBackend) extend(ctx context.Context, k *keys, token string, ttl time.Duration) (extendStatus, error) {
	keys, counter := b.mutexExtendKeys(k)
	n, err := b.run(ctx, scriptExtend, keys, token, ttlArg(ttl), flag(b.reentrant), counter).Int64()
	return checkStatus("extend", n, err)
}

func (b *scriptBackend) pttl(ctx context.Context, k *keys, token string) (time.Duration, error) {
	n, err := b.run(ctx, scriptPTTL, k.LockKeys(), token, flag(b.reentrant)).Int64()
	return pttlReply(n, err)
}

// pttlReply reads a pttl script's reply (pttl.lua, rw_pttl.lua, and
// sem_pttl.lua, which share its codes).
func pttlReply(n int64, err error) (time.Duration, error) {
	switch {
	case err != nil:
		return 0, err
	case n == -1:
		return 0, errGone
	case n == -3:
		return 0, errNotOurs
	case n == -2:
		return -1, nil // ours, no expiry: only if someone PERSISTed it
	case n < 0:
		return 0, fmt.Errorf("lock: unexpected pttl reply %d", n)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// renew sends every item's extend script in one pipeline (see
// luascripts.ExtendAll).
func (b *scriptBackend) renew(ctx context.Context, items []renewItem, st []extendStatus, errs []error) {
	all := make([]luascripts.ExtendItem, len(items))
	for i, it := range items {
		all[i] = luascripts.ExtendItem{Keys: it.k, Token: it.token, TTL: it.ttl, Holders: b.info, Fence: b.keepsFence()}
	}
	for i, cmd := range luascripts.ExtendAll(ctx, b.rdb, all, b.reentrant) {
		n, err := cmd.Int64()
		st[i], errs[i] = checkStatus("renewal", n, err)
	}
}

// isWrongType reports a WRONGTYPE reply: the key holds a kind of value the
// command cannot read, so it is not our hold.
func isWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
}
