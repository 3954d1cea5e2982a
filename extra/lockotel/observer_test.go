package lockotel_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/extra/lockotel"
	"github.com/agentlock/lock/internal/eventlabel"
	"github.com/agentlock/lock/internal/obstest"
	"github.com/agentlock/lock/internal/redistest"
)

// otelSDK is an in-memory metric reader and span recorder.
type otelSDK struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	mp     *sdkmetric.MeterProvider
	tp     *sdktrace.TracerProvider
}

func newSDK(t *testing.T) *otelSDK {
	t.Helper()
	s := &otelSDK{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	s.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	t.Cleanup(func() {
		_ = s.mp.Shutdown(context.Background())
		_ = s.tp.Shutdown(context.Background())
	})
	return s
}

func (s *otelSDK) observer(t *testing.T, opts ...lockotel.Option) lock.Observer {
	t.Helper()
	o, err := lockotel.NewObserver(append([]lockotel.Option{lockotel.WithMeterProvider(s.mp), lockotel.WithTracerProvider(s.tp)}, opts...)...)
	if err != nil {
		t.Fatalf("NewObserver() error = %v", err)
	}
	return o
}

// metrics collects every metric by name.
func (s *otelSDK) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	obstest.Must(t, "Collect()", s.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sum is the value of counter name for the data points with attribute
// kv (any when kv is empty).
func sum(t *testing.T, ms map[string]metricdata.Aggregation, name string, kv ...attribute.KeyValue) int64 {
	t.Helper()
	d, ok := ms[name].(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("metric %s = %T, want an int64 sum", name, ms[name])
	}
	var n int64
	for _, p := range d.DataPoints {
		if hasAll(p.Attributes, kv) {
			n += p.Value
		}
	}
	return n
}

// count is the number of observations of histogram name with attribute kv.
func count(t *testing.T, ms map[string]metricdata.Aggregation, name string, kv ...attribute.KeyValue) uint64 {
	t.Helper()
	d, ok := ms[name].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("metric %s = %T, want a float64 histogram", name, ms[name])
	}
	var n uint64
	for _, p := range d.DataPoints {
		if hasAll(p.Attributes, kv) {
			n += p.Count
		}
	}
	return n
}

func hasAll(set attribute.Set, kv []attribute.KeyValue) bool {
	for _, want := range kv {
		if v, ok := set.Value(want.Key); !ok || v != want.Value {
			return false
		}
	}
	return true
}

func keyFor(t *testing.T) string { return strings.ReplaceAll(t.Name(), "/", ":") }

// TestObserver_metrics drives every kind of event through a Client, on
// miniredis and on a real redis-server, and reads each instrument back
// from the SDK's manual reader.
func TestObserver_metrics(t *testing.T) {
	for name, rdb := range map[string]func(t testing.TB) *redis.Client{
		"miniredis": obstest.MiniRDB,
		"redis":     func(t testing.TB) *redis.Client { return redistest.Start(t, redistest.Config{}).Client(t) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sdk := newSDK(t)
			obs := sdk.observer(t)
			renewed := make(chan struct{}, 1)
			r := rdb(t)
			c := obstest.NewClient(t, r, lock.WithObserver(lock.ObserverFunc(func(e lock.Event) {
				obs.Observe(e)
				if e.Kind == lock.EventRenewed {
					select {
					case renewed <- struct{}{}:
					default:
					}
				}
			})))
			key := keyFor(t)
			l := c.NewLock(key, lock.WithTTL(time.Second))
			obstest.Must(t, "Acquire()", l.Acquire(ctx))
			if ok, err := c.NewLock(key).TryAcquire(ctx); ok || err != nil {
				t.Fatalf("TryAcquire() = %v, %v, want false, nil", ok, err)
			}
			select {
			case <-renewed:
			case <-time.After(5 * time.Second):
				t.Fatal("no renewal within 5s")
			}
			obstest.Must(t, "Release()", l.Release(ctx))
			obstest.Must(t, "Acquire()", l.Acquire(ctx))
			obstest.Must(t, "DEL", r.Del(ctx, "lock:{"+key+"}").Err())
			if err := l.Extend(ctx, time.Second); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Extend() after the key went error = %v, want ErrNotHeld", err)
			}
			obstest.Must(t, "WithLock()", c.WithLock(ctx, key, func(context.Context) error { return nil }))

			ms := sdk.metrics(t)
			outcome := func(v string) attribute.KeyValue { return attribute.String("agentlock.outcome", v) }
			for _, w := range []struct {
				name string
				kv   []attribute.KeyValue
				want int64
			}{
				{"agentlock.acquires", []attribute.KeyValue{outcome("acquired")}, 3},
				{"agentlock.acquires", []attribute.KeyValue{outcome("contended")}, 1},
				{"agentlock.releases", []attribute.KeyValue{outcome("released")}, 2},
				{"agentlock.losses", []attribute.KeyValue{attribute.String("agentlock.loss.reason", "vanished")}, 1},
				{"agentlock.waiters", nil, 0},
			} {
				if got := sum(t, ms, w.name, w.kv...); got != w.want {
					t.Errorf("%s%v = %d, want %d", w.name, w.kv, got, w.want)
				}
			}
			renewals := sum(t, ms, "agentlock.renewals")
			if renewals < 1 || sum(t, ms, "agentlock.acquire.attempts") < 4 {
				t.Errorf("renewals = %d, attempts = %d; want at least 1 and 4", renewals, sum(t, ms, "agentlock.acquire.attempts"))
			}
			for name, want := range map[string]uint64{
				"agentlock.acquire.wait":         3,
				"agentlock.hold.duration":        3,
				"agentlock.with_lock.duration":   1,
				"agentlock.renewal.margin":       uint64(renewals),
				"agentlock.renewal.margin_ratio": uint64(renewals),
			} {
				if got := count(t, ms, name); got != want {
					t.Errorf("%s count = %d, want %d", name, got, want)
				}
			}
		})
	}
}

// TestObserver_spans: acquire and release spans are children of the
// caller's span, cover their calls, and carry fence, attempts and outcome;
// a WithLock's span is a child of the caller's, and the acquire, fn's own
// span and the release inside it are its children; no key by default; a
// failed try is an event on the caller's span; calls outside a trace make
// no span.
func TestObserver_spans(t *testing.T) {
	sdk := newSDK(t)
	c := obstest.NewClient(t, obstest.MiniRDB(t), lock.WithObserver(sdk.observer(t)))
	key := keyFor(t)
	ctx, parent := sdk.tp.Tracer("test").Start(context.Background(), "request")

	l := c.NewLock(key)
	obstest.Must(t, "Acquire()", l.Acquire(ctx))
	if ok, _ := c.NewLock(key).TryAcquire(ctx); ok {
		t.Fatal("TryAcquire() = true while held")
	}
	obstest.Must(t, "Release()", l.Release(ctx))
	errFn := errors.New("fn failed")
	if err := c.WithLock(ctx, key, func(ctx context.Context) error {
		_, sp := sdk.tp.Tracer("test").Start(ctx, "fn")
		sp.End()
		return errFn
	}); !errors.Is(err, errFn) {
		t.Fatalf("WithLock() error = %v, want fn's", err)
	}
	obstest.Must(t, "Acquire() outside a trace", l.Acquire(context.Background()))
	obstest.Must(t, "Release() outside a trace", l.Release(context.Background()))
	parent.End()

	spans := sdk.spans.Ended()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	want := []string{"agentlock.acquire", "agentlock.acquire", "agentlock.release", "agentlock.acquire", "fn", "agentlock.release", "agentlock.with_lock", "request"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("spans %v, want %v", names, want)
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			m[kv.Key] = kv.Value
		}
		return m
	}
	withLock := spans[6]
	for i, s := range spans[:7] {
		wantParent, parentName := parent.SpanContext(), "the caller's span"
		if i >= 3 && i < 6 {
			wantParent, parentName = withLock.SpanContext(), "the with_lock span"
			if s.StartTime().Before(withLock.StartTime()) || s.EndTime().After(withLock.EndTime()) {
				t.Fatalf("span %s from %v to %v, outside the with_lock span (%v to %v)", s.Name(), s.StartTime(), s.EndTime(), withLock.StartTime(), withLock.EndTime())
			}
		}
		if s.Parent().SpanID() != wantParent.SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Fatalf("span %s parent %v, want %s", s.Name(), s.Parent().SpanID(), parentName)
		}
		if s.Name() != "fn" && !s.StartTime().Before(s.EndTime()) {
			t.Fatalf("span %s from %v to %v, want a positive duration", s.Name(), s.StartTime(), s.EndTime())
		}
		for k, v := range attrs(s) {
			if strings.Contains(v.String(), key) {
				t.Fatalf("span %s attribute %s = %s carries the key", s.Name(), k, v.String())
			}
		}
	}
	acq, busy, rel, wl := attrs(spans[0]), attrs(spans[1]), attrs(spans[2]), attrs(withLock)
	if acq["agentlock.fence"].AsInt64() == 0 || acq["agentlock.attempts"].AsInt64() != 1 || acq["agentlock.outcome"].AsString() != "acquired" {
		t.Fatalf("acquire span attributes %v, want a fence, 1 attempt, acquired", acq)
	}
	if busy["agentlock.outcome"].AsString() != "contended" || spans[1].Status().Code == codes.Error {
		t.Fatalf("busy TryAcquire span %v (%v), want contended, not an error", busy, spans[1].Status())
	}
	if rel["agentlock.fence"] != acq["agentlock.fence"] || rel["agentlock.outcome"].AsString() != "released" || rel["agentlock.held_seconds"].AsFloat64() <= 0 {
		t.Fatalf("release span attributes %v, want the acquire's fence, released, a hold time", rel)
	}
	if wl["agentlock.outcome"].AsString() != "error" || withLock.Status().Code != codes.Error || wl["agentlock.fence"].AsInt64() <= acq["agentlock.fence"].AsInt64() {
		t.Fatalf("with_lock span %v (%v), want error status and a later fence", wl, withLock.Status())
	}
}

// TestObserver_attemptFailedEvent: a failed try is an event on the
// caller's span.
func TestObserver_attemptFailedEvent(t *testing.T) {
	sdk := newSDK(t)
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	c := obstest.NewClient(t, rdb, lock.WithObserver(sdk.observer(t)))
	m.Close() // Redis unreachable
	ctx, parent := sdk.tp.Tracer("test").Start(context.Background(), "request")
	if ok, err := c.NewLock(keyFor(t)).TryAcquire(ctx); ok || err == nil {
		t.Fatalf("TryAcquire() with Redis down = %v, %v, want an error", ok, err)
	}
	parent.End()
	spans := sdk.spans.Ended()
	req := spans[len(spans)-1]
	if len(req.Events()) != 1 || req.Events()[0].Name != "agentlock.attempt_failed" {
		t.Fatalf("caller's span events %v, want one agentlock.attempt_failed", req.Events())
	}
	if acq := spans[0]; acq.Name() != "agentlock.acquire" || acq.Status().Code != codes.Error {
		t.Fatalf("first span %s status %v, want agentlock.acquire with an error", acq.Name(), acq.Status())
	}
	ms := sdk.metrics(t)
	if got := sum(t, ms, "agentlock.acquire.attempt_failures"); got != 1 {
		t.Fatalf("agentlock.acquire.attempt_failures = %d, want 1", got)
	}
	if got := sum(t, ms, "agentlock.acquires", attribute.String("agentlock.outcome", "error")); got != 1 {
		t.Fatalf("agentlock.acquires{outcome=error} = %d, want 1", got)
	}
}

// TestObserver_keyGroup: with a key grouping, metrics and spans carry the
// group, never the key; past the limit, "other".
func TestObserver_keyGroup(t *testing.T) {
	sdk := newSDK(t)
	c := obstest.NewClient(t, obstest.MiniRDB(t), lock.WithObserver(sdk.observer(t, lockotel.WithKeyGroup(lockotel.PrefixGroup, 1))))
	ctx, parent := sdk.tp.Tracer("test").Start(context.Background(), "request")
	for _, key := range []string{"session:1", "session:2", "tool:x"} {
		obstest.Must(t, "WithLock()", c.WithLock(ctx, key, func(context.Context) error { return nil }))
	}
	parent.End()
	ms := sdk.metrics(t)
	group := func(g string) attribute.KeyValue { return attribute.String("agentlock.key.group", g) }
	if got := sum(t, ms, "agentlock.acquires", group("session:")); got != 2 {
		t.Fatalf("acquires of session: = %d, want 2", got)
	}
	if got := sum(t, ms, "agentlock.acquires", group("other")); got != 1 {
		t.Fatalf("acquires of other = %d, want 1", got)
	}
	for _, s := range sdk.spans.Ended()[:3] {
		found := false
		for _, kv := range s.Attributes() {
			found = found || kv == group("session:")
		}
		if !found {
			t.Fatalf("span %s attributes %v, want group session:", s.Name(), s.Attributes())
		}
	}
}

// TestObserver_releaseAllocs: outside a trace, the Observer adds no
// allocation to a Release (a real redis-server: miniredis would count its
// own).
func TestObserver_releaseAllocs(t *testing.T) {
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	sdk := newSDK(t)
	without := obstest.ReleaseAllocs(t, obstest.NewClient(t, rdb, lock.WithNotify(false)), "none")
	with := obstest.ReleaseAllocs(t, obstest.NewClient(t, rdb, lock.WithNotify(false), lock.WithObserver(sdk.observer(t))), "otel")
	if with >= without+0.5 {
		t.Fatalf("allocations per Release with the Observer = %.2f, without = %.2f; want no more", with, without)
	}
	if got := count(t, sdk.metrics(t), "agentlock.hold.duration"); got == 0 {
		t.Fatal("the Observer saw no release")
	}
}

// TestNewObserver_defaults: with no options the global providers are used
// (no-ops here), and a nil option is ignored.
func TestNewObserver_defaults(t *testing.T) {
	o, err := lockotel.NewObserver(nil)
	if err != nil || o == nil {
		t.Fatalf("NewObserver() = %v, %v", o, err)
	}
	o.Observe(lock.Event{Kind: lock.EventLost, Err: errors.New("x")})
	o.Observe(lock.Event{Kind: lock.EventAcquire, Ctx: trace.ContextWithSpanContext(context.Background(), trace.SpanContext{})})
}

// TestObserver_everyLossReason: each loss reason the code declares is
// counted under its own agentlock.loss.reason (never "other"), and the
// package doc lists it.
func TestObserver_everyLossReason(t *testing.T) {
	sdk := newSDK(t)
	o := sdk.observer(t)
	reasons := obstest.LossReasons(t)
	for _, r := range reasons {
		o.Observe(lock.Event{Kind: lock.EventLost, Key: "k", Err: &lock.LostError{Key: "k", Reason: r}})
	}
	ms := sdk.metrics(t)
	doc := obstest.ReadSource(t, "extra/lockotel/lockotel.go")
	for _, r := range reasons {
		label := eventlabel.LossNames[eventlabel.LossReason(&lock.LostError{Reason: r})]
		got := sum(t, ms, "agentlock.losses", attribute.String("agentlock.loss.reason", label))
		if label == eventlabel.LossNames[0] || got != 1 {
			t.Errorf("%v: %d losses with reason %q, want 1 under a label of its own", r, got, label)

			continue
		}
		if !regexp.MustCompile(`\b` + label + `\b`).MatchString(doc) {
			t.Errorf("lockotel.go does not list the reason %s", label)
		}
	}
}
