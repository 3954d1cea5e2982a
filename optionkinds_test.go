package lock_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// holding is one hold of any kind, as the option matrix drives it.
type holding interface {
	Acquire(ctx context.Context) error
	Release(ctx context.Context) error
	Lost() <-chan struct{}
}

// matrixKind is one column of the option matrix: a kind of lock, made on
// a Client with a lock's options.
type matrixKind struct {
	name  string // the column
	label string // the kind as errors name it (lock.KindLabels)
	hold  func(t *testing.T, c *lock.Client, key string, opts ...lock.Option) holding
	// block returns a hold on key, by c, that the kind's hold must wait for.
	block func(c *lock.Client, key string) holding
}

// matrixKinds are the columns, in the order of matrixOption.want.
var matrixKinds = []matrixKind{
	{"mutex", "a mutex", func(_ *testing.T, c *lock.Client, key string, opts ...lock.Option) holding {
		return c.NewLock(key, opts...)
	}, plainBlock},
	{"re-entrant", "a re-entrant mutex", func(_ *testing.T, c *lock.Client, key string, opts ...lock.Option) holding {
		return c.NewLock(key, append([]lock.Option{lock.WithOwner("matrix")}, opts...)...)
	}, func(c *lock.Client, key string) holding { return c.NewLock(key, lock.WithOwner("other")) }},
	{"fair", "a fair mutex", func(_ *testing.T, c *lock.Client, key string, opts ...lock.Option) holding {
		return c.NewLock(key, append([]lock.Option{lock.WithFair(true)}, opts...)...)
	}, plainBlock},
	{"read", "a read-write lock", func(_ *testing.T, c *lock.Client, key string, opts ...lock.Option) holding {
		return c.NewRWLock(key, opts...).ReadLock()
	}, writeBlock},
	{"write", "a read-write lock", func(_ *testing.T, c *lock.Client, key string, opts ...lock.Option) holding {
		return c.NewRWLock(key, opts...).WriteLock()
	}, writeBlock},
	{"permit", "a semaphore permit", func(_ *testing.T, c *lock.Client, key string, opts ...lock.Option) holding {
		return c.NewSemaphore(key, 1, opts...).Permit()
	}, func(c *lock.Client, key string) holding { return c.NewSemaphore(key, 1).Permit() }},
	{"multi", "a multi-lock", func(_ *testing.T, c *lock.Client, key string, opts ...lock.Option) holding {
		return c.NewMultiLock([]string{key, key + ":2"}, opts...)
	}, plainBlock},
	{"once", "Once", func(t *testing.T, c *lock.Client, key string, opts ...lock.Option) holding {
		return newCallback(t, func(ctx context.Context, fn func(context.Context) error) error {
			_, _, err := c.Once(ctx, key, func(ctx context.Context) ([]byte, error) { return []byte("v"), fn(ctx) }, opts...)
			return err
		})
	}, plainBlock},
	{"withlock", "a mutex", func(t *testing.T, c *lock.Client, key string, opts ...lock.Option) holding {
		return newCallback(t, func(ctx context.Context, fn func(context.Context) error) error {
			return c.WithLock(ctx, key, fn, opts...)
		})
	}, plainBlock},
	{"election", "an election", func(_ *testing.T, c *lock.Client, key string, opts ...lock.Option) holding {
		return candidate{c.NewElection(key, opts...)}
	}, func(c *lock.Client, key string) holding { return candidate{c.NewElection(key)} }},
	{"limiter", "a rate limiter", func(_ *testing.T, c *lock.Client, key string, opts ...lock.Option) holding {
		return &unitHold{lim: c.NewLimiter(key, matrixRate, opts...)}
	}, func(c *lock.Client, key string) holding { return &unitHold{lim: c.NewLimiter(key, matrixRate)} }},
}

// candidate is an election's candidate as a hold: Acquire campaigns,
// Release resigns.
type candidate struct{ *lock.Election }

func (c candidate) Acquire(ctx context.Context) error { return c.Campaign(ctx, "matrix") }
func (c candidate) Release(ctx context.Context) error { return c.Resign(ctx) }

// matrixRate is the limiter column's rate: one unit, and the next an hour
// later, so that a unit taken blocks the next until it is given back.
var matrixRate = lock.Rate{N: 1, Per: time.Hour}

// unitHold is one unit of a limiter as the option matrix drives it: Wait
// takes it, Release gives it back; it is never lost.
type unitHold struct {
	lim *lock.Limiter
	r   []*lock.Reservation
}

func (u *unitHold) Acquire(ctx context.Context) (err error) {
	u.r, err = lock.WaitAll(ctx, lock.Take{L: u.lim, N: 1})
	return err
}

func (u *unitHold) Release(ctx context.Context) error { return u.r[0].Cancel(ctx) }

func (u *unitHold) Lost() <-chan struct{} { return nil }

func plainBlock(c *lock.Client, key string) holding { return c.NewLock(key) }
func writeBlock(c *lock.Client, key string) holding { return c.NewRWLock(key).WriteLock() }

// callback is a hold by a call that runs fn under it (WithLock, Once):
// Acquire returns once fn runs, Release lets fn return and returns the
// call's error, Lost is fn's ctx.
type callback struct {
	run  func(ctx context.Context, fn func(context.Context) error) error
	held chan context.Context
	stop chan struct{}
	done chan error
	fctx context.Context
	end  sync.Once
}

func newCallback(t *testing.T, run func(context.Context, func(context.Context) error) error) *callback {
	cb := &callback{run: run, held: make(chan context.Context, 1), stop: make(chan struct{}), done: make(chan error, 1)}
	t.Cleanup(func() { cb.end.Do(func() { close(cb.stop) }) })
	return cb
}

func (cb *callback) Acquire(ctx context.Context) error {
	go func() {
		cb.done <- cb.run(ctx, func(fctx context.Context) error {
			cb.held <- fctx
			<-cb.stop
			return nil
		})
	}()
	select {
	case cb.fctx = <-cb.held:
		return nil
	case err := <-cb.done:
		if err == nil {
			err = errors.New("returned without running fn")
		}
		return err
	}
}

func (cb *callback) Release(context.Context) error {
	cb.end.Do(func() { close(cb.stop) })
	return <-cb.done
}

func (cb *callback) Lost() <-chan struct{} { return cb.fctx.Done() }

// matrixEnv is one cell's test: a Client on a real Redis and a key of its
// own.
type matrixEnv struct {
	ctx  context.Context
	c    *lock.Client
	rdb  *redis.Client
	key  string
	kind matrixKind
}

// hold returns the kind's hold on the cell's key with opts.
func (e *matrixEnv) hold(t *testing.T, opts ...lock.Option) holding {
	return e.kind.hold(t, e.c, e.key, opts...)
}

// acquire returns the kind's hold with opts, held; it is released when
// the test ends unless the test released it.
func (e *matrixEnv) acquire(t *testing.T, opts ...lock.Option) holding {
	t.Helper()
	h := e.hold(t, opts...)
	must(t, "Acquire()", h.Acquire(e.ctx))
	return h
}

// smoke acquires and releases the kind's hold with opts.
func (e *matrixEnv) smoke(t *testing.T, opts ...lock.Option) {
	t.Helper()
	must(t, "Release()", e.acquire(t, opts...).Release(e.ctx))
}

// matrixOption is one row of the option matrix: an option, a value of it
// that asks each kind for something, and, per kind, whether that kind
// supports it: '+' it works (check shows its effect), '-' it is refused
// with an error wrapping ErrInvalid that names the option and the kind,
// and ignored when set on the Client.
type matrixOption struct {
	name string
	opt  lock.Option
	// want: mutex, re-entrant, fair, read, write, permit, multi, once,
	// withlock, election, limiter.
	want  string
	check func(t *testing.T, e *matrixEnv, opt lock.Option) // nil: e.smoke
}

func matrixOptions() []matrixOption {
	return []matrixOption{
		{"WithTTL", lock.WithTTL(time.Minute), "++++++++++-", checkTTL},
		{"WithWatchdog", lock.WithWatchdog(false), "++++++++++-", checkWatchdog},
		{"WithWaitTimeout", lock.WithWaitTimeout(50 * time.Millisecond), "+++++++++++", checkWaitTimeout},
		{"WithBackoff", lock.WithBackoff(time.Millisecond, 2*time.Millisecond), "++++++++++-", nil},
		{"WithNotify", lock.WithNotify(true), "++++++-++++", checkNotify},
		{"WithReleaseMode", lock.WithReleaseMode(lock.ReleaseWatch), "+-------+--", checkWatch},
		{"WithPrefix", lock.WithPrefix("matrix:"), "+++++++++++", checkPrefix},
		{"WithOwner", lock.WithOwner("matrix"), "++------+--", checkOwner},
		{"WithObserver", nil, "+++++++++++", checkObserver},
		{"WithLogger", nil, "++++++++++-", checkLogger},
		{"WithMaxHold", lock.WithMaxHold(lock.MinTTL), "++++++++++-", checkMaxHold},
		{"WithFencing", lock.WithFencing(false), "+++++++++--", checkFencing},
		{"WithCoalescing", lock.WithCoalescing(false), "+++++++++++", nil},
		{"WithReplicaAck", lock.WithReplicaAck(1, 20*time.Millisecond), "++------+--", checkReplicaAck},
		{"WithResultTTL", lock.WithResultTTL(time.Minute), "-------+---", checkResultTTL},
		{"WithErrorTTL", lock.WithErrorTTL(time.Minute), "-------+---", checkErrorTTL},
		{"WithFair", lock.WithFair(true), "+-+-----+--", checkFair},
		{"WithMetadata", lock.WithMetadata("matrix md"), "++-+++-++--", checkMetadata},
		{"WithHolderInfo", lock.WithHolderInfo(true), "++-+++-++--", checkHolderInfo},
		{"WithAudit", nil, "++++++++++-", checkAudit},
		{"WithFallback", lock.WithFallback(lock.FallbackLocal), "+++++++++--", nil},
		{"WithMaxWaiters", lock.WithMaxWaiters(1), "++++++++++-", nil},
	}
}

// checkWatchdog: the hold is lost at its safety deadline: nothing renews it.
func checkWatchdog(t *testing.T, e *matrixEnv, opt lock.Option) {
	h := e.acquire(t, opt, lock.WithTTL(2*lock.MinTTL))
	waitClosed(t, h.Lost(), 5*time.Second, "Lost() without renewal")
	_ = h.Release(e.ctx) // the hold is gone: its error says so
}

// checkPrefix: the hold lives under the option's prefix, not the default one.
func checkPrefix(t *testing.T, e *matrixEnv, opt lock.Option) {
	h := e.acquire(t, opt)
	if n := e.rdb.Exists(e.ctx, "matrix:{"+e.key+"}", lockKey(e.key)).Val(); n != 1 {
		t.Fatalf("keys under the prefix and the default one: %d exist, want 1", n)
	}
	must(t, "Release()", h.Release(e.ctx))
}

// checkOwner: a lock of the same owner takes the key while it is held.
func checkOwner(t *testing.T, e *matrixEnv, opt lock.Option) {
	h := e.acquire(t, opt)
	again := e.c.NewLock(e.key, lock.WithOwner("matrix"))
	if ok, err := again.TryAcquire(e.ctx); !ok || err != nil {
		t.Fatalf("same owner's TryAcquire() = %v, %v; want true, nil", ok, err)
	}
	must(t, "nested Release()", again.Release(e.ctx))
	must(t, "Release()", h.Release(e.ctx))
}

// checkObserver: the Observer sees the acquisition.
func checkObserver(t *testing.T, e *matrixEnv, _ lock.Option) {
	var acquired atomic.Int32
	e.smoke(t, lock.WithObserver(lock.ObserverFunc(func(ev lock.Event) {
		if ev.Kind == lock.EventAcquire && ev.Err == nil {
			acquired.Add(1)
		}
	})))
	if acquired.Load() == 0 {
		t.Fatal("the Observer saw no acquisition")
	}
}

// checkLogger: a loss is logged as a warning.
func checkLogger(t *testing.T, e *matrixEnv, _ lock.Option) {
	var warned atomic.Int32
	log := slog.New(countHandler{n: &warned, level: slog.LevelWarn})
	h := e.acquire(t, lock.WithLogger(log), lock.WithWatchdog(false), lock.WithTTL(2*lock.MinTTL))
	waitClosed(t, h.Lost(), 5*time.Second, "Lost() without renewal")
	_ = h.Release(e.ctx)
	if warned.Load() == 0 {
		t.Fatal("the loss was not logged")
	}
}

// checkMaxHold: the hold is lost once held for the max hold.
func checkMaxHold(t *testing.T, e *matrixEnv, opt lock.Option) {
	h := e.acquire(t, opt)
	waitClosed(t, h.Lost(), 5*time.Second, "Lost() past the max hold")
	_ = h.Release(e.ctx)
}

// checkFencing: no fence counter is written.
func checkFencing(t *testing.T, e *matrixEnv, opt lock.Option) {
	h := e.acquire(t, opt)
	if n := e.rdb.Exists(e.ctx, lockKey(e.key)+":fence").Val(); n != 0 {
		t.Fatal("a fence counter was written")
	}
	must(t, "Release()", h.Release(e.ctx))
}

// checkReplicaAck: with no replica to confirm it, the acquisition does not count.
func checkReplicaAck(t *testing.T, e *matrixEnv, opt lock.Option) {
	// No replica confirms: the acquisition does not count.
	wantErr(t, "Acquire()", e.hold(t, opt).Acquire(e.ctx), lock.ErrNotAcquired)
}

// checkResultTTL: the stored result lives the option's TTL, not the default.
func checkResultTTL(t *testing.T, e *matrixEnv, opt lock.Option) {
	e.smoke(t, opt)
	if d := e.rdb.PTTL(e.ctx, lockKey(e.key)+":result").Val(); d <= 0 || d > time.Minute {
		t.Fatalf("stored result's PTTL = %v, want in (0, 1m]", d)
	}
}

// checkErrorTTL: a failure of fn is stored: the next call gets it.
func checkErrorTTL(t *testing.T, e *matrixEnv, opt lock.Option) {
	failed := errors.New("matrix")
	_, _, err := e.c.Once(e.ctx, e.key, func(context.Context) ([]byte, error) { return nil, failed }, opt)
	wantErr(t, "Once()", err, failed)
	_, shared, err := e.c.Once(e.ctx, e.key, func(context.Context) ([]byte, error) { return nil, nil })
	if !shared || !errors.Is(err, lock.ErrOnceFailed) {
		t.Fatalf("second Once() = %v, %v; want the stored failure", shared, err)
	}
}

// checkMetadata: Inspect shows the hold's metadata.
func checkMetadata(t *testing.T, e *matrixEnv, opt lock.Option) {
	checkHolder(t, e, opt, func(h lock.Holder) bool { return h.Metadata == "matrix md" })
}

// checkHolderInfo: Inspect shows the holder's process.
func checkHolderInfo(t *testing.T, e *matrixEnv, opt lock.Option) {
	checkHolder(t, e, opt, func(h lock.Holder) bool { return h.PID == os.Getpid() })
}

// checkAudit: the acquisition and the release are in the stream.
func checkAudit(t *testing.T, e *matrixEnv, _ lock.Option) {
	stream := "audit:{" + e.key + "}"
	e.smoke(t, lock.WithAudit(stream, 100))
	if n := e.rdb.XLen(e.ctx, stream).Val(); n < 2 {
		t.Fatalf("audit stream has %d entries, want an acquisition and a release", n)
	}
}

// sampleOption is a value of each option whose row tests no value of its
// own: an Observer, a Logger, a stream.
func (o *matrixOption) sample(key string) lock.Option {
	switch {
	case o.opt != nil:
		return o.opt
	case o.name == "WithObserver":
		return lock.WithObserver(lock.ObserverFunc(func(lock.Event) {}))
	case o.name == "WithLogger":
		return lock.WithLogger(slog.New(slog.DiscardHandler))
	}
	return lock.WithAudit("audit:{"+key+"}", 100)
}

// TestOptions_kindMatrix: every option on every kind is either supported —
// it has its effect — or refused with an error wrapping ErrInvalid that
// names the option and the kind; set on the Client, a refused option is
// ignored by that kind, whose holds work as without it. One subtest per
// pair, on a real Redis.
func TestOptions_kindMatrix(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	c := newClient(t, tg.rdb)
	for _, o := range matrixOptions() {
		for i, k := range matrixKinds {
			t.Run(o.name+"/"+k.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				e := &matrixEnv{ctx: ctx, c: c, rdb: tg.rdb, key: keyFor(t), kind: k}
				opt := o.sample(e.key)
				if o.want[i] == '-' {
					wantRefused(t, "Acquire()", e.hold(t, opt).Acquire(ctx), o.name, k.label)
					e.c = newClient(t, tg.rdb, opt)
					e.smoke(t)
					return
				}
				check := o.check
				if k.name == "limiter" {
					check = limiterChecks[o.name]
				}
				if check == nil {
					e.smoke(t, opt)
					return
				}
				check(t, e, opt)
			})
		}
	}
}

// TestOptions_kindMatrix_complete: the matrix has a row for every exported
// option of the package (every With… function returning an Option, found
// by parsing its sources) and for every row of the package's own option
// table, each with a cell for every column; and a column for every kind
// that table tells apart.
func TestOptions_kindMatrix_complete(t *testing.T) {
	t.Parallel()
	var rows []string
	for _, o := range matrixOptions() {
		if len(o.want) != len(matrixKinds) {
			t.Errorf("%s: %d cells, want one per kind (%d)", o.name, len(o.want), len(matrixKinds))
		}
		rows = append(rows, o.name)
	}
	declared := exportedOptions(t)
	slices.Sort(rows)
	slices.Sort(declared)
	if !slices.Equal(rows, declared) {
		t.Errorf("matrix rows %v\nexported options %v", rows, declared)
	}
	table := lock.OptionNames()
	slices.Sort(table)
	if !slices.Equal(rows, table) {
		t.Errorf("matrix rows %v\noption table %v", rows, table)
	}
	for _, label := range lock.KindLabels() {
		if !slices.ContainsFunc(matrixKinds, func(k matrixKind) bool { return k.label == label }) {
			t.Errorf("kind %q has no column", label)
		}
	}
}

// exportedOptions parses the package's non-test sources for exported
// functions named With… that return an Option.
func exportedOptions(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f.Name(), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || !strings.HasPrefix(fn.Name.Name, "With") {
				continue
			}
			res := fn.Type.Results
			if res != nil && len(res.List) == 1 {
				if id, ok := res.List[0].Type.(*ast.Ident); ok && id.Name == "Option" {
					names = append(names, fn.Name.Name)
				}
			}
		}
	}
	return names
}

// checkTTL: the hold's key lives the option's TTL, not the default's.
func checkTTL(t *testing.T, e *matrixEnv, opt lock.Option) {
	h := e.acquire(t, opt)
	if d := e.rdb.PTTL(e.ctx, lockKey(e.key)).Val(); d <= lock.DefaultTTL || d > time.Minute {
		t.Fatalf("PTTL(%s) = %v, want in (%v, 1m]", lockKey(e.key), d, lock.DefaultTTL)
	}
	must(t, "Release()", h.Release(e.ctx))
}

// checkWaitTimeout: an Acquire behind a holder gives up after the wait
// timeout.
func checkWaitTimeout(t *testing.T, e *matrixEnv, opt lock.Option) {
	b := e.kind.block(e.c, e.key)
	must(t, "blocker's Acquire()", b.Acquire(e.ctx))
	wantErr(t, "Acquire()", e.hold(t, opt).Acquire(e.ctx), lock.ErrNotAcquired)
	must(t, "blocker's Release()", b.Release(e.ctx))
}

// checkNotify: a waiter whose backoff outlasts the holder's TTL left
// takes the key soon after the holder's release: the release woke it. A
// limiter's Wait, whose unit is due in an hour, likewise returns soon
// after the unit before it is given back.
func checkNotify(t *testing.T, e *matrixEnv, opt lock.Option) {
	b := e.kind.block(e.c, e.key)
	must(t, "blocker's Acquire()", b.Acquire(e.ctx))
	var replies atomic.Int32
	rdb := redis.NewClient(e.rdb.Options())
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(replyCounter{&replies})
	waiter := *e
	waiter.c = newClient(t, rdb)
	opts := []lock.Option{opt, lock.WithBackoff(time.Hour, time.Hour)}
	if e.kind.name == "limiter" {
		opts = opts[:1] // no backoff: it sleeps until its unit is due
	}
	h := waiter.hold(t, opts...)
	got := make(chan error, 1)
	// No deadline: a limiter's Wait refuses at once units due after it.
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { got <- h.Acquire(wctx) }()
	// Its first attempt found the key held: it waits.
	if !waitFor(5*time.Second, func() bool { return replies.Load() > 0 }) {
		t.Fatal("the waiter sent nothing")
	}
	must(t, "blocker's Release()", b.Release(e.ctx))
	select {
	case err := <-got:
		must(t, "Acquire()", err)
	case <-time.After(lock.DefaultTTL / 3):
		t.Fatalf("Acquire() still waiting %v after the release", lock.DefaultTTL/3)
	}
	must(t, "Release()", h.Release(e.ctx))
}

// checkWatch: the hold is taken and released without a script.
func checkWatch(t *testing.T, e *matrixEnv, opt lock.Option) {
	var scripts atomic.Int32
	rdb := redis.NewClient(e.rdb.Options())
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(anyScripts{&scripts})
	e.c = newClient(t, rdb)
	e.smoke(t, opt)
	if n := scripts.Load(); n != 0 {
		t.Fatalf("%d scripts sent, want none", n)
	}
}

// checkFair: an Acquire behind a holder queues, and takes the key at its
// release.
func checkFair(t *testing.T, e *matrixEnv, opt lock.Option) {
	b := e.kind.block(e.c, e.key)
	must(t, "blocker's Acquire()", b.Acquire(e.ctx))
	h := e.hold(t, opt)
	got := make(chan error, 1)
	go func() { got <- h.Acquire(e.ctx) }()
	probe := e.c.NewLock(e.key, lock.WithFair(true))
	for n := 0; n != 1; {
		var err error
		if n, err = probe.Waiters(e.ctx); err != nil {
			t.Fatalf("Waiters() error = %v", err)
		}
		select {
		case err := <-got:
			t.Fatalf("Acquire() = %v while the key was held", err)
		case <-time.After(time.Millisecond):
		}
	}
	must(t, "blocker's Release()", b.Release(e.ctx))
	must(t, "Acquire()", <-got)
	must(t, "Release()", h.Release(e.ctx))
}

// checkHolder: Inspect shows a holder of the key for which ok holds.
func checkHolder(t *testing.T, e *matrixEnv, opt lock.Option, ok func(lock.Holder) bool) {
	h := e.acquire(t, opt)
	info, err := e.c.Inspect(e.ctx, e.key)
	must(t, "Inspect()", err)
	if !slices.ContainsFunc(info.Holders, ok) {
		t.Fatalf("Inspect() holders = %+v: none shows the option", info.Holders)
	}
	must(t, "Release()", h.Release(e.ctx))
}

// anyScripts counts every script a client sends (EVAL, EVALSHA),
// pipelined ones included.
type anyScripts struct{ n *atomic.Int32 }

func (s anyScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s anyScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.count(cmd)
		return next(ctx, cmd)
	}
}

func (s anyScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			s.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (s anyScripts) count(cmd redis.Cmder) {
	if name := cmd.Name(); strings.HasPrefix(name, "eval") {
		s.n.Add(1)
	}
}

// countHandler counts the records at level or above.
type countHandler struct {
	n     *atomic.Int32
	level slog.Level
}

func (h countHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h countHandler) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// replyCounter counts the replies a client received, pipelined ones
// included.
type replyCounter struct{ n *atomic.Int32 }

func (r replyCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r replyCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.n.Add(1)
		return err
	}
}

func (r replyCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		r.n.Add(int32(len(cmds)))
		return err
	}
}

// wantRefused fails unless err wraps ErrInvalid and its text names the
// option and the kind.
func wantRefused(t *testing.T, call string, err error, option, kind string) {
	t.Helper()
	if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), option) || !strings.Contains(err.Error(), kind) {
		t.Fatalf("%s error = %v, want ErrInvalid naming %s and %s", call, err, option, kind)
	}
}

// TestOptions_fair_refusedPerLock: WithFair(true) on a semaphore, a
// read-write lock, a multi-lock or Once is refused, naming both.
func TestOptions_fair_refusedPerLock(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb)
	key := keyFor(t)
	fair := lock.WithFair(true)

	sem := c.NewSemaphore(key+":sem", 2, fair)
	p1, p2 := sem.Permit(), sem.Permit()
	wantRefused(t, "Permit().Acquire()", p1.Acquire(ctx), "WithFair", "semaphore permit")
	_, err := p2.TryAcquire(ctx)
	wantRefused(t, "Permit().TryAcquire()", err, "WithFair", "semaphore permit")
	_, err = sem.Available(ctx)
	wantRefused(t, "Available()", err, "WithFair", "semaphore permit")

	rw := c.NewRWLock(key+":rw", fair)
	wantRefused(t, "ReadLock().Acquire()", rw.ReadLock().Acquire(ctx), "WithFair", "read-write lock")
	wantRefused(t, "WriteLock().Acquire()", rw.WriteLock().Acquire(ctx), "WithFair", "read-write lock")

	m := c.NewMultiLock([]string{key + ":a", key + ":b"}, fair)
	wantRefused(t, "MultiLock.Acquire()", m.Acquire(ctx), "WithFair", "multi-lock")

	_, _, err = c.Once(ctx, key+":once", func(context.Context) ([]byte, error) { return nil, nil }, fair)
	wantRefused(t, "Once()", err, "WithFair", "Once")

	if keys := tg.rdb.Keys(ctx, "*").Val(); len(keys) != 0 {
		t.Fatalf("refused locks wrote %v", keys)
	}
}

// TestOptions_fair_clientDefault: WithFair set on the Client applies to
// its mutexes and is ignored by the kinds it does not apply to: two
// permits of a semaphore are both held, and neither is lost; a multi-lock,
// a read-write lock and Once work as they do without it.
func TestOptions_fair_clientDefault(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := newClient(t, tg.rdb, lock.WithFair(true))
	key := keyFor(t)

	sem := c.NewSemaphore(key+":sem", 2)
	p1, p2 := sem.Permit(), sem.Permit()
	must(t, "p1.Acquire()", p1.Acquire(ctx))
	must(t, "p2.Acquire()", p2.Acquire(ctx))
	if n, err := sem.Available(ctx); err != nil || n != 0 {
		t.Fatalf("Available() = %d, %v; want 0, nil", n, err)
	}
	if ok, err := sem.Permit().TryAcquire(ctx); ok || err != nil {
		t.Fatalf("third permit TryAcquire() = %v, %v; want false, nil", ok, err)
	}
	if isClosed(p1.Lost()) || isClosed(p2.Lost()) {
		t.Fatalf("a permit was lost: %v, %v", p1.LostErr(), p2.LostErr())
	}
	must(t, "p1.Release()", p1.Release(ctx))
	must(t, "p2.Release()", p2.Release(ctx))
	must(t, "WithPermit()", sem.WithPermit(ctx, func(context.Context) error { return nil }))

	keys := []string{key + ":a", key + ":b"}
	m := c.NewMultiLock(keys)
	must(t, "MultiLock.Acquire()", m.Acquire(ctx))
	must(t, "MultiLock.Release()", m.Release(ctx))
	must(t, "WithMultiLock()", c.WithMultiLock(ctx, keys, func(context.Context) error { return nil }))

	rw := c.NewRWLock(key + ":rw")
	r1, r2 := rw.ReadLock(), rw.ReadLock()
	must(t, "r1.Acquire()", r1.Acquire(ctx))
	must(t, "r2.Acquire()", r2.Acquire(ctx))
	must(t, "r1.Release()", r1.Release(ctx))
	must(t, "r2.Release()", r2.Release(ctx))
	must(t, "WithWriteLock()", rw.WithWriteLock(ctx, func(context.Context) error { return nil }))

	v, _, err := c.Once(ctx, key+":once", func(context.Context) ([]byte, error) { return []byte("v"), nil })
	if err != nil || string(v) != "v" {
		t.Fatalf("Once() = %q, %v; want \"v\", nil", v, err)
	}
}

// TestOptions_offValues: a value of an option that asks a kind for
// nothing (WithFair(false), ReleaseScript, no replica acks, no holder
// info, no metadata, no listening) is accepted by every kind.
func TestOptions_offValues(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newClient(t, tg.rdb)
	off := []lock.Option{lock.WithFair(false), lock.WithReleaseMode(lock.ReleaseScript), lock.WithReplicaAck(0, 0),
		lock.WithHolderInfo(false), lock.WithMetadata(""), lock.WithNotify(false)}
	for _, k := range matrixKinds {
		t.Run(k.name, func(t *testing.T) {
			e := &matrixEnv{ctx: ctx, c: c, rdb: tg.rdb, key: keyFor(t), kind: k}
			e.smoke(t, off...)
		})
	}
}

// TestOptions_fairAndOwner: a lock given both WithFair(true) and WithOwner
// is refused with an error naming both; with one of them on the Client,
// the lock's own decides.
func TestOptions_fairAndOwner(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := keyFor(t)
	err := newClient(t, tg.rdb).NewLock(key, lock.WithFair(true), lock.WithOwner("o")).Acquire(ctx)
	wantRefused(t, "Acquire()", err, "WithFair", "re-entrant mutex")
	wantRefused(t, "Acquire()", err, "WithOwner", "fair mutex")

	// A fair Client's lock given an owner is re-entrant.
	fair := newClient(t, tg.rdb, lock.WithFair(true))
	a, b := fair.NewLock(key, lock.WithOwner("o")), fair.NewLock(key, lock.WithOwner("o"))
	must(t, "a.Acquire()", a.Acquire(ctx))
	if ok, err := b.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("same owner's TryAcquire() = %v, %v; want true, nil", ok, err)
	}
	must(t, "b.Release()", b.Release(ctx))
	must(t, "a.Release()", a.Release(ctx))

	// A re-entrant Client's lock made fair queues.
	owned := newClient(t, tg.rdb, lock.WithOwner("o"))
	l := owned.NewLock(key, lock.WithFair(true))
	must(t, "fair Acquire()", l.Acquire(ctx))
	if ok, err := owned.NewLock(key).TryAcquire(ctx); ok || err != nil {
		t.Fatalf("owner's TryAcquire() on a fair hold = %v, %v; want false, nil", ok, err)
	}
	must(t, "fair Release()", l.Release(ctx))
}
