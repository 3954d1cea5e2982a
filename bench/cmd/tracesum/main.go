// Command tracesum summarises the per-operation tasks of a bench trace
// (go run . -only s5 -trace s5.trace): for each implementation, the ops
// around the median and the slowest ones, with the caller's time by state,
// what every goroutine did meanwhile (wake-ups, goroutines created, running
// and runnable time), and overlap with GC.
//
//	cd bench && go run . -only s5 -quick -trace /tmp/s5.trace
//	go run ./cmd/tracesum /tmp/s5.trace
//
// The harness runs one op at a time, so whatever a goroutine does during a
// task is charged to that op (the GC's background workers included).
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// op is one task: one TryAcquire+Release of one implementation.
type op struct {
	impl       string
	caller     trace.GoID
	start, end trace.Time
	state      map[trace.GoState]time.Duration // the caller's time by state
	regions    map[string]time.Duration        // acquire, release
	wakeups    int                             // any goroutine made runnable from waiting
	created    int                             // goroutines created
	running    time.Duration                   // every goroutine's running time
	runnable   time.Duration                   // every goroutine's runnable time: waiting for a P
	longest    time.Duration                   // the longest single runnable stretch
	gc         time.Duration                   // GC mark or stop-the-world time overlapping the op
}

func (o *op) dur() time.Duration { return o.end.Sub(o.start) }

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tracesum TRACE")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracesum:", err)
		os.Exit(1)
	}
	defer f.Close()
	ops, err := read(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracesum:", err)
		os.Exit(1)
	}
	report(os.Stdout, ops)
}

// read collects the ops of tasks named "s5:<impl>".
func read(rd io.Reader) ([]*op, error) {
	r, err := trace.NewReader(rd)
	if err != nil {
		return nil, err
	}
	var (
		done     []*op
		byTask   = map[trace.TaskID]*op{}
		current  *op // the harness runs one op at a time
		gState   = map[trace.GoID]trace.GoState{}
		gSince   = map[trace.GoID]trace.Time{}
		regionAt = map[string]trace.Time{}
		gcSince  trace.Time
		gcRanges int
	)
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			return done, nil
		}
		if err != nil {
			return nil, err
		}
		switch ev.Kind() {
		case trace.EventTaskBegin:
			t := ev.Task()
			impl, ok := strings.CutPrefix(t.Type, "s5:")
			if !ok {
				continue
			}
			current = &op{impl: impl, caller: ev.Goroutine(), start: ev.Time(),
				state: map[trace.GoState]time.Duration{}, regions: map[string]time.Duration{}}
			byTask[t.ID] = current
			gSince[ev.Goroutine()] = ev.Time()
			if gcRanges > 0 {
				gcSince = ev.Time()
			}
		case trace.EventTaskEnd:
			o := byTask[ev.Task().ID]
			if o == nil {
				continue
			}
			delete(byTask, ev.Task().ID)
			o.end = ev.Time()
			o.state[gState[o.caller]] += o.end.Sub(gSince[o.caller])
			if gcRanges > 0 {
				o.gc += o.end.Sub(gcSince)
			}
			done = append(done, o)
			current = nil
		case trace.EventRegionBegin:
			regionAt[ev.Region().Type] = ev.Time()
		case trace.EventRegionEnd:
			if current != nil && ev.Goroutine() == current.caller {
				current.regions[ev.Region().Type] += ev.Time().Sub(regionAt[ev.Region().Type])
			}
		case trace.EventRangeBegin, trace.EventRangeEnd:
			name := ev.Range().Name
			if !strings.HasPrefix(name, "GC concurrent mark") && !strings.HasPrefix(name, "stop-the-world") {
				continue
			}
			if ev.Kind() == trace.EventRangeBegin {
				if gcRanges == 0 {
					gcSince = ev.Time()
				}
				gcRanges++
				continue
			}
			if gcRanges == 0 {
				continue // began before the trace
			}
			gcRanges--
			if gcRanges == 0 && current != nil {
				from := gcSince
				if current.start > from {
					from = current.start
				}
				current.gc += ev.Time().Sub(from)
			}
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			g := st.Resource.Goroutine()
			from, to := st.Goroutine()
			if o := current; o != nil {
				since := gSince[g]
				if since < o.start {
					since = o.start
				}
				d := ev.Time().Sub(since)
				switch gState[g] {
				case trace.GoRunning:
					o.running += d
				case trace.GoRunnable:
					o.runnable += d
					o.longest = max(o.longest, d)
				}
				if g == o.caller {
					o.state[gState[g]] += d
				}
				switch {
				case from == trace.GoNotExist && to != trace.GoNotExist:
					o.created++
				case from == trace.GoWaiting && to == trace.GoRunnable:
					o.wakeups++
				}
			}
			gState[g], gSince[g] = to, ev.Time()
		}
	}
}

// report prints, per implementation, the latency percentiles and the mean
// of each figure over the ops around the median and over the slowest 1%.
func report(w io.Writer, ops []*op) {
	by := map[string][]*op{}
	for _, o := range ops {
		by[o.impl] = append(by[o.impl], o)
	}
	var impls []string
	for k := range by {
		impls = append(impls, k)
	}
	slices.Sort(impls)
	for _, impl := range impls {
		os := by[impl]
		slices.SortFunc(os, func(a, b *op) int { return int(a.dur() - b.dur()) })
		n := len(os)
		at := func(q float64) time.Duration { return os[int(q*float64(n-1))].dur() }
		fmt.Fprintf(w, "%s: %d ops, p50 %v, p90 %v, p99 %v, max %v\n", impl, n, at(.5), at(.9), at(.99), at(1))
		for _, band := range []struct {
			name   string
			lo, hi int
		}{{"p40-p60", n * 40 / 100, n * 60 / 100}, {"p95-p99", n * 95 / 100, n * 99 / 100}, {"p99-max", n * 99 / 100, n}} {
			sel := os[band.lo:band.hi]
			if len(sel) == 0 {
				continue
			}
			var m op
			m.state, m.regions = map[trace.GoState]time.Duration{}, map[string]time.Duration{}
			var total time.Duration
			gcOps := 0
			for _, o := range sel {
				total += o.dur()
				for k, v := range o.state {
					m.state[k] += v
				}
				for k, v := range o.regions {
					m.regions[k] += v
				}
				m.wakeups += o.wakeups
				m.created += o.created
				m.running += o.running
				m.runnable += o.runnable
				m.longest += o.longest
				m.gc += o.gc
				if o.gc > 0 {
					gcOps++
				}
			}
			k := time.Duration(len(sel))
			fk := float64(len(sel))
			fmt.Fprintf(w, "  %-8s %4d ops, mean %v (acquire %v, release %v); caller running %v, runnable %v, waiting %v\n",
				band.name, len(sel), total/k, m.regions["acquire"]/k, m.regions["release"]/k,
				m.state[trace.GoRunning]/k, m.state[trace.GoRunnable]/k, m.state[trace.GoWaiting]/k)
			fmt.Fprintf(w, "           all goroutines: %.1f wake-ups, %.1f created, running %v, runnable %v (longest stretch %v); GC in %.0f%% of ops, %v per op\n",
				float64(m.wakeups)/fk, float64(m.created)/fk, m.running/k, m.runnable/k, m.longest/k, 100*float64(gcOps)/fk, m.gc/k)
		}
	}
}
