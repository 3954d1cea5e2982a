package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	xtrace "golang.org/x/exp/trace"
)

// summarise counts, in the trace at path, goroutines created and woken per
// op, the wake-ups grouped by the woken goroutine's stack and the waker's.
func summarise(path string, n int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := xtrace.NewReader(f)
	if err != nil {
		return err
	}
	created, woken := 0, 0
	by := map[string]int{}
	blockedAt := map[xtrace.GoID]string{}
	wakes := map[xtrace.GoID]int{}
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if ev.Kind() != xtrace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != xtrace.ResourceGoroutine {
			continue
		}
		from, to := st.Goroutine()
		switch {
		case from == xtrace.GoNotExist && to != xtrace.GoNotExist:
			created++
			by["create by "+top(ev.Stack(), 3)]++
		case from == xtrace.GoWaiting && to == xtrace.GoRunnable:
			woken++
			wakes[st.Resource.Goroutine()]++
			by["wake <- "+top(ev.Stack(), 3)]++
		case from == xtrace.GoRunning && to == xtrace.GoWaiting:
			blockedAt[st.Resource.Goroutine()] = top(ev.Stack(), 6)
		}
	}
	fmt.Printf("trace: goroutines created %.3f/op, woken %.3f/op\n", float64(created)/float64(n), float64(woken)/float64(n))
	for g, c := range wakes {
		if float64(c)/float64(n) >= 0.01 {
			by[fmt.Sprintf("g%d woken, blocks in %s", g, blockedAt[g])] = c
		}
	}
	var ks []string
	for k, c := range by {
		if float64(c)/float64(n) >= 0.01 {
			ks = append(ks, k)
		}
	}
	sort.Slice(ks, func(i, j int) bool { return by[ks[i]] > by[ks[j]] })
	for _, k := range ks {
		fmt.Printf("  %.3f/op %s\n", float64(by[k])/float64(n), k)
	}
	return nil
}

// top names the innermost k frames of s.
func top(s xtrace.Stack, k int) string {
	var fs []string
	for f := range s.Frames() {
		fs = append(fs, f.Func[strings.LastIndex(f.Func, "/")+1:])
		if len(fs) == k {
			break
		}
	}
	if len(fs) == 0 {
		return "-"
	}
	return strings.Join(fs, "<")
}
