package lockprom_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/extra/lockprom"
	"github.com/agentlock/lock/internal/eventlabel"
	"github.com/agentlock/lock/internal/obstest"
	"github.com/agentlock/lock/internal/redistest"
)

// eachRedis runs fn on miniredis and on a real redis-server (skipped when
// redis-server is missing, unless LOCK_REQUIRE_REDIS=1).
func eachRedis(t *testing.T, fn func(t *testing.T, rdb *redis.Client)) {
	t.Run("miniredis", func(t *testing.T) { fn(t, obstest.MiniRDB(t)) })
	t.Run("redis", func(t *testing.T) { fn(t, redistest.Start(t, redistest.Config{}).Client(t)) })
}

// sampleCount is the number of observations of histogram name whose
// labels include want, in what c collects.
func sampleCount(t *testing.T, c prometheus.Collector, name string, want map[string]string) uint64 {
	t.Helper()
	var n uint64
	for _, m := range family(t, c, name).GetMetric() {
		if hasLabels(m, want) {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// family gathers c and returns the family called name.
func family(t *testing.T, c prometheus.Collector, name string) *dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	obstest.Must(t, "Register()", reg.Register(c))
	fams, err := reg.Gather()
	obstest.Must(t, "Gather()", err)
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	t.Fatalf("no metric family %q", name)
	return nil
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
			n++
		}
	}
	return n == len(want)
}

// TestCollector_metrics drives every kind of event through a Client and
// checks each metric: acquisitions by outcome and their waits, attempts,
// waiters, releases, holds, renewals and their margin, losses by reason,
// WithLock.
func TestCollector_metrics(t *testing.T) {
	eachRedis(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		col := lockprom.NewCollector()
		renewed := make(chan struct{}, 1)
		c := obstest.NewClient(t, rdb, lock.WithObserver(lock.ObserverFunc(func(e lock.Event) {
			col.Observe(e)
			if e.Kind == lock.EventRenewed {
				select {
				case renewed <- struct{}{}:
				default:
				}
			}
		})))
		key := strings.ReplaceAll(t.Name(), "/", ":")

		l := c.NewLock(key, lock.WithTTL(time.Second))
		obstest.Must(t, "Acquire()", l.Acquire(ctx))
		if ok, err := c.NewLock(key).TryAcquire(ctx); ok || err != nil {
			t.Fatalf("TryAcquire() = %v, %v, want false, nil", ok, err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := c.NewLock(key).Acquire(cctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire(cancelled ctx) error = %v, want context.Canceled", err)
		}
		select {
		case <-renewed:
		case <-time.After(5 * time.Second):
			t.Fatal("no renewal within 5s")
		}
		obstest.Must(t, "Release()", l.Release(ctx))
		if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("second Release() error = %v, want ErrNotHeld", err)
		}
		// A loss: the key vanishes, Extend finds it gone.
		obstest.Must(t, "Acquire()", l.Acquire(ctx))
		obstest.Must(t, "DEL", rdb.Del(ctx, "lock:{"+key+"}").Err())
		if err := l.Extend(ctx, time.Second); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("Extend() after the key went error = %v, want ErrNotHeld", err)
		}
		obstest.Must(t, "WithLock()", c.WithLock(ctx, key, func(context.Context) error { return nil }))

		counters := map[string]float64{
			`agentlock_acquires_total{outcome="acquired"}`:  3, // Acquire twice, WithLock
			`agentlock_acquires_total{outcome="contended"}`: 1,
			`agentlock_acquires_total{outcome="canceled"}`:  1,
			`agentlock_acquires_total{outcome="error"}`:     0,
			`agentlock_releases_total{outcome="released"}`:  2, // Release, WithLock's
			`agentlock_releases_total{outcome="not_held"}`:  1,
			`agentlock_losses_total{reason="vanished"}`:     1, // gone while it should be valid
			`agentlock_waiters`:                             0,
		}
		text := exposition(t, col)
		for series, want := range counters {
			if got, ok := text[series]; !ok || got != want {
				t.Errorf("%s = %v (found %v), want %v", series, got, ok, want)
			}
		}
		if got := text["agentlock_renewals_total"]; got < 1 {
			t.Errorf("agentlock_renewals_total = %v, want at least 1", got)
		}
		if got := text["agentlock_acquire_attempts_total"]; got < 4 {
			t.Errorf("agentlock_acquire_attempts_total = %v, want at least 4", got)
		}
		for name, want := range map[string]uint64{
			"agentlock_wait_seconds": 3,
			"agentlock_hold_seconds": 3, // released, lost, WithLock's
		} {
			if got := sampleCount(t, col, name, nil); got != want {
				t.Errorf("%s count = %d, want %d", name, got, want)
			}
		}
		if got := sampleCount(t, col, "agentlock_with_lock_seconds", map[string]string{"outcome": "ok"}); got != 1 {
			t.Errorf("agentlock_with_lock_seconds{outcome=ok} count = %d, want 1", got)
		}
		renewals := uint64(text["agentlock_renewals_total"])
		for _, name := range []string{"agentlock_renewal_margin_seconds", "agentlock_renewal_margin_ratio"} {
			if got := sampleCount(t, col, name, nil); got != renewals {
				t.Errorf("%s count = %d, want one per renewal: %d", name, got, renewals)
			}
		}
		// Renewed at a third of the TTL: two thirds left, never under the
		// tenth the safety margin keeps.
		if got := text[`agentlock_renewal_margin_ratio_bucket{le="0.1"}`]; got != 0 {
			t.Errorf("renewals with at most a tenth of the TTL left = %v, want 0", got)
		}
	})
}

// exposition returns every sample of c by its series name in the text
// format (name{labels}).
func exposition(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	obstest.Must(t, "Register()", reg.Register(c))
	fams, err := reg.Gather()
	obstest.Must(t, "Gather()", err)
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+strconv.Quote(lp.GetValue()))
			}
			name := f.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[name] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				for _, b := range m.GetHistogram().GetBucket() {
					bl := append(append([]string(nil), labels...), "le="+strconv.Quote(strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)))
					out[f.GetName()+"_bucket{"+strings.Join(bl, ",")+"}"] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

// TestCollector_keyGroup: with a key grouping every series carries the
// group, never the key; past the limit new groups count as "other".
func TestCollector_keyGroup(t *testing.T) {
	ctx := context.Background()
	col := lockprom.NewCollector(lockprom.WithKeyGroup(lockprom.PrefixGroup, 2))
	c := obstest.NewClient(t, obstest.MiniRDB(t), lock.WithObserver(col))
	for _, key := range []string{"session:1", "session:2", "tool:pay:9", "index:7"} {
		obstest.Must(t, "WithLock()", c.WithLock(ctx, key, func(context.Context) error { return nil }))
	}
	text := exposition(t, col)
	for series, want := range map[string]float64{
		`agentlock_acquires_total{group="session:",outcome="acquired"}`: 2,
		`agentlock_acquires_total{group="tool:",outcome="acquired"}`:    1,
		`agentlock_acquires_total{group="other",outcome="acquired"}`:    1,
	} {
		if got := text[series]; got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	for series := range text {
		if strings.Contains(series, "session:1") || strings.Contains(series, "index") {
			t.Fatalf("series %s carries a key", series)
		}
	}
	if got := lockprom.PrefixGroup("plain"); got != "plain" {
		t.Fatalf("PrefixGroup(plain) = %q, want plain", got)
	}
}

// TestCollector_lint: the metrics follow Prometheus' naming conventions,
// and a Collector registers without conflicts beside another namespace.
func TestCollector_lint(t *testing.T) {
	col := lockprom.NewCollector()
	problems, err := testutil.CollectAndLint(col)
	obstest.Must(t, "CollectAndLint()", err)
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
	reg := prometheus.NewPedanticRegistry()
	obstest.Must(t, "Register(default)", reg.Register(col))
	obstest.Must(t, "Register(other namespace)", reg.Register(lockprom.NewCollector(lockprom.WithNamespace("other"))))
	if n, want := testutil.CollectAndCount(col, "agentlock_losses_total"), len(eventlabel.LossNames); n != want {
		t.Fatalf("agentlock_losses_total series = %d, want one per reason and other: %d", n, want)
	}
}

// TestCollector_zeroValue: a zero Collector observes and collects nothing,
// without panicking.
func TestCollector_zeroValue(t *testing.T) {
	var col lockprom.Collector
	col.Observe(lock.Event{Kind: lock.EventAcquire})
	if n := testutil.CollectAndCount(&col); n != 0 {
		t.Fatalf("zero Collector collects %d metrics, want 0", n)
	}
	lockprom.NewCollector(nil).Observe(lock.Event{Kind: lock.EventLost, Err: errors.New("x")})
}

// TestCollector_releaseAllocs: the Collector adds no allocation to a
// Release, on a real redis-server (miniredis would count its own).
func TestCollector_releaseAllocs(t *testing.T) {
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	without := obstest.ReleaseAllocs(t, obstest.NewClient(t, rdb, lock.WithNotify(false)), "none")
	for name, col := range map[string]*lockprom.Collector{
		"plain":   lockprom.NewCollector(),
		"grouped": lockprom.NewCollector(lockprom.WithKeyGroup(lockprom.PrefixGroup, 0)),
	} {
		with := obstest.ReleaseAllocs(t, obstest.NewClient(t, rdb, lock.WithNotify(false), lock.WithObserver(col)), name)
		// Half an allocation of slack for the background's own; one more
		// per Release is caught.
		if with >= without+0.5 {
			t.Fatalf("%s: allocations per Release with the Collector = %.2f, without = %.2f; want no more", name, with, without)
		}
		if got := sampleCount(t, col, "agentlock_hold_seconds", nil); got == 0 {
			t.Fatalf("%s: the Collector saw no release", name)
		}
	}
}

// TestCollector_everyLossReason: each loss reason the code declares is
// counted under its own label (never "other"), and the package doc, the
// dashboard and alerts.yml list that label.
func TestCollector_everyLossReason(t *testing.T) {
	col := lockprom.NewCollector()
	reasons := obstest.LossReasons(t)
	for _, r := range reasons {
		col.Observe(lock.Event{Kind: lock.EventLost, Key: "k", Err: &lock.LostError{Key: "k", Reason: r}})
	}
	fam := family(t, col, "agentlock_losses_total")
	docs := map[string]string{
		"lockprom.go":    obstest.ReadSource(t, "extra/lockprom/lockprom.go"),
		"dashboard.json": obstest.ReadSource(t, "extra/lockprom/dashboard.json"),
		"alerts.yml":     obstest.ReadSource(t, "extra/lockprom/alerts.yml"),
	}
	for _, r := range reasons {
		label := eventlabel.LossNames[eventlabel.LossReason(&lock.LostError{Reason: r})]
		n := 0.0
		for _, m := range fam.GetMetric() {
			if hasLabels(m, map[string]string{"reason": label}) {
				n += m.GetCounter().GetValue()
			}
		}
		if label == eventlabel.LossNames[0] || n != 1 {
			t.Errorf("%v: %v losses with reason=%q, want 1 under a label of its own", r, n, label)

			continue
		}
		for name, text := range docs {
			if !regexp.MustCompile(`\b` + label + `\b`).MatchString(text) {
				t.Errorf("%s does not list the reason %s", name, label)
			}
		}
	}
}
