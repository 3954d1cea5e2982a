package faulttest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// A history is what the holders of a fault scenario did, as operations with
// the wall-clock times (Unix ns, one clock for every process on the
// machine) of their call and their return, so that porcupine can check it
// against lockModel. Three operations:
//
//	A key client mode -> fence       Acquire returned a hold
//	R key client                     the hold ended: Release, or its loss
//	W key client fence -> accepted   a write to the fenced store (referee)
//
// A hold's end is the moment the lock may be someone else's, so it is an
// interval, not a point, whenever the holder cannot know it exactly:
//
//   - a hold released: the Release call;
//   - a hold declared lost: its Lost() time (the library promises Lost()
//     closes before the server lets anyone else in), widened back to the
//     SIGSTOP for a paused holder, whose clock stood still meanwhile;
//   - a SIGKILLed holder's hold: from the kill to the end of the history.
//
// A holder that writes after its loss keeps its client name, so its late
// writes are checked like any other: accepted only if no newer hold had
// been issued.
//
// A fair lock's hold is holdExclusive; a MultiLock's is one 'A' and one
// 'R' per member key, each with its fence there, all holdExclusive, since
// porcupine checks each key apart (held_test.go: acquireOps, endOps).
// Adding a kind to the process scenarios is a holdKind (holdkind_test.go)
// and a case in workerHold.
type histOp struct {
	Op     byte // 'A', 'R', 'W'
	Key    string
	Client string
	Mode   byte  // A: holdExclusive, holdRead or holdPermit
	Fence  int64 // A: the hold's fence; W: the write's
	OK     bool  // W: the store accepted it
	Call   int64
	Ret    int64
}

// Modes of a hold: a mutex's or a writer's (alone), a reader's (beside
// readers), a semaphore's permit (beside up to n-1 permits).
const (
	holdExclusive = 'x'
	holdRead      = 'r'
	holdPermit    = 'p'
)

func (o histOp) String() string {
	switch o.Op {
	case 'A':
		return fmt.Sprintf("%s acquire(%c) -> fence %d", o.Client, o.Mode, o.Fence)
	case 'R':
		return o.Client + " release"
	}
	verdict := "rejected"
	if o.OK {
		verdict = "accepted"
	}
	return fmt.Sprintf("%s write(fence %d) -> %s", o.Client, o.Fence, verdict)
}

// line is o as one line of a history file.
func (o histOp) line() string {
	return fmt.Sprintf("%c %s %s %c %d %t %d %d\n", o.Op, o.Key, o.Client, max(o.Mode, '-'), o.Fence, o.OK, o.Call, o.Ret)
}

func parseHistOp(s string) (histOp, error) {
	f := strings.Fields(s)
	if len(f) != 8 || len(f[0]) != 1 || len(f[3]) != 1 {
		return histOp{}, fmt.Errorf("history line %q", s)
	}
	o := histOp{Op: f[0][0], Key: f[1], Client: f[2], Mode: f[3][0]}
	if o.Mode == '-' {
		o.Mode = 0
	}
	var errs [4]error
	o.Fence, errs[0] = strconv.ParseInt(f[4], 10, 64)
	o.OK, errs[1] = strconv.ParseBool(f[5])
	o.Call, errs[2] = strconv.ParseInt(f[6], 10, 64)
	o.Ret, errs[3] = strconv.ParseInt(f[7], 10, 64)
	for _, err := range errs {
		if err != nil {
			return histOp{}, fmt.Errorf("history line %q: %w", s, err)
		}
	}
	return o, nil
}

// histEnv names the file a worker appends its history to.
const histEnv = "FT_HISTORY"

// appendHistory appends ops to the file at path (a worker's own file) in
// one write, so that a worker killed later leaves whole lines.
func appendHistory(path string, ops ...histOp) error {
	if path == "" || len(ops) == 0 {
		return nil
	}
	var b strings.Builder
	for _, o := range ops {
		b.WriteString(o.line())
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// now is the history's clock.
func now() int64 { return time.Now().UnixNano() }

// history collects a scenario's operations: this process's, and each
// worker's from its file.
type history struct {
	dir string
	mu  sync.Mutex
	ops []histOp
	nw  int
}

func newHistory(t testing.TB) *history { return &history{dir: t.TempDir()} }

// workerEnv gives a worker its history file.
func (h *history) workerEnv() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nw++
	return histEnv + "=" + filepath.Join(h.dir, "worker-"+strconv.Itoa(h.nw))
}

func (h *history) add(ops ...histOp) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, ops...)
}

// all returns this process's operations and every worker's.
func (h *history) all(t testing.TB) []histOp {
	t.Helper()
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	n := h.nw
	h.mu.Unlock()
	for i := 1; i <= n; i++ {
		f, err := os.Open(filepath.Join(h.dir, "worker-"+strconv.Itoa(i)))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			o, err := parseHistOp(sc.Text())
			if err != nil {
				f.Close()
				t.Fatalf("history: %v", err)
			}
			ops = append(ops, o)
		}
		f.Close()
	}
	return ops
}

// widenEnd moves the start of client's last hold end on key back to from
// (a SIGSTOPped holder's: its hold may have ended any time after the stop),
// or, when the hold has no end in the history (a SIGKILLed holder), adds
// one from from to until.
func widenEnd(ops []histOp, key, client string, from, until int64) []histOp {
	for i := len(ops) - 1; i >= 0; i-- {
		o := &ops[i]
		if o.Key != key || o.Client != client {
			continue
		}
		switch o.Op {
		case 'R':
			o.Call = min(o.Call, from)
			return ops
		case 'A':
			return append(ops, histOp{Op: 'R', Key: key, Client: client, Call: from, Ret: until})
		}
	}
	return ops
}

// holder is one hold in lockState.
type holder struct {
	client string
	mode   byte
	fence  int64
}

// lockState is lockModel's state for one key.
type lockState struct {
	holders  []holder // sorted by client
	maxFence int64    // highest fence issued
	accepted int64    // the fenced store's last accepted fence
}

// lockModel is the sequential specification every lock kind must meet,
// per key: at most n holders (n is 1 for a mutex and a writer; readers are
// unbounded), no reader beside a writer and no writer beside anyone,
// fences increasing (a mutex's, a writer's and a permit's above every fence
// before; a reader's at least the highest), and a fenced store that
// accepts a write only above its last accepted fence and never a stale one:
// an accepted write is its holder's while the hold lasts, or carries the
// highest fence issued (a holder declared lost whom nobody has replaced).
//
// Every acquire of ops must be linearized and each one's fence must be
// above the one before (a reader's at least equal), so acquires take
// effect in the order of their fences; the model knows the fences of ops
// and lets an acquire in only when no fence of ops lies between the highest
// so far and its own. That rules out no linearization that could complete,
// and spares porcupine the search through every order of a crowd of
// waiters. porcupine checks each key apart, and each key's history in
// pieces cut where only acquires are in flight (splitQuiet).
func lockModel(n int, ops []histOp) porcupine.Model {
	fences := map[string][]int64{}
	for _, o := range ops {
		if o.Op == 'A' {
			fences[o.Key] = append(fences[o.Key], o.Fence)
		}
	}
	for k, fs := range fences {
		slices.Sort(fs)
		fences[k] = slices.Compact(fs)
	}
	return porcupine.Model{
		Partition: partitionLock,
		Init:      func() any { return lockState{} },
		Step: func(st, in, _ any) (bool, any) {
			s := st.(lockState)
			if seed, ok := in.(lockSeed); ok { // the start of a piece
				return s.maxFence == 0 && s.accepted == 0 && len(s.holders) == 0, seed.st
			}
			o := in.(histOp)
			ok, next := stepLock(s, o, n, fences[o.Key])
			return ok, next
		},
		Equal: func(a, b any) bool {
			x, y := a.(lockState), b.(lockState)
			return x.maxFence == y.maxFence && x.accepted == y.accepted && slices.Equal(x.holders, y.holders)
		},
		DescribeOperation: func(in, _ any) string {
			if seed, ok := in.(lockSeed); ok {
				return describeSeed(seed)
			}
			return in.(histOp).String()
		},
		DescribeState: func(st any) string {
			s := st.(lockState)
			return fmt.Sprintf("holders %v, max fence %d, store at %d", s.holders, s.maxFence, s.accepted)
		},
	}
}

// stepLock applies o to s; false if the model forbids it. fences are the
// key's acquired fences, sorted.
func stepLock(s lockState, o histOp, n int, fences []int64) (bool, lockState) {
	i, held := slices.BinarySearchFunc(s.holders, o.Client, func(h holder, c string) int { return strings.Compare(h.client, c) })
	switch o.Op {
	case 'A':
		if held {
			return false, s
		}
		for _, h := range s.holders {
			if o.Mode == holdExclusive || h.mode == holdExclusive || (o.Mode == holdPermit) != (h.mode == holdPermit) {
				return false, s
			}
		}
		j, _ := slices.BinarySearch(fences, s.maxFence+1)
		next := j < len(fences) && fences[j] == o.Fence // no fence of the history between
		switch o.Mode {
		case holdRead:
			if o.Fence < s.maxFence || o.Fence > s.maxFence && !next {
				return false, s
			}
		case holdPermit:
			if len(s.holders) >= n || o.Fence <= s.maxFence || !next {
				return false, s
			}
		default:
			if o.Fence <= s.maxFence || !next {
				return false, s
			}
		}
		s.holders = slices.Insert(slices.Clone(s.holders), i, holder{o.Client, o.Mode, o.Fence})
		s.maxFence = max(s.maxFence, o.Fence)
		return true, s
	case 'R':
		if !held {
			return false, s
		}
		s.holders = slices.Delete(slices.Clone(s.holders), i, i+1)
		return true, s
	case 'W':
		if !o.OK {
			return o.Fence <= s.accepted, s
		}
		if o.Fence <= s.accepted {
			return false, s
		}
		if !(held && s.holders[i].fence == o.Fence) && o.Fence < s.maxFence {
			return false, s // a stale write accepted
		}
		s.accepted = o.Fence
		return true, s
	}
	return false, s
}

// checkLinearizable checks ops against lockModel(n) with porcupine and
// fails t if they are not linearizable (or the check times out); the
// failure names an HTML visualization of the history. It returns the
// number of operations and the check's duration for a FIGURE line.
func checkLinearizable(t *testing.T, ops []histOp, n int) (int, time.Duration) {
	t.Helper()
	for _, o := range ops {
		if o.Ret < o.Call {
			t.Fatalf("history: %v returns before its call", o)
		}
	}
	m := lockModel(n, ops)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(m, porcupineOps(ops), time.Minute)
	took := time.Since(start)
	if res != porcupine.Ok {
		path := filepath.Join(t.ArtifactDir(), "history.html")
		if err := porcupine.VisualizePath(m, info, path); err != nil {
			t.Logf("visualization: %v", err)
		}
		t.Errorf("porcupine: history of %d operations is %s against the lock model (n=%d); visualization: %s",
			len(ops), res, n, path)
	}
	return len(ops), took
}

// linearizable is porcupine's verdict on ops against lockModel(n), without
// a visualization.
func linearizable(ops []histOp, n int) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(lockModel(n, ops), porcupineOps(ops), time.Minute)
}

// porcupineOps turns a history into porcupine's operations, one client id
// per holder.
func porcupineOps(ops []histOp) []porcupine.Operation {
	pops := make([]porcupine.Operation, 0, len(ops))
	ids := map[string]int{}
	for _, o := range ops {
		id, ok := ids[o.Client]
		if !ok {
			id = len(ids)
			ids[o.Client] = id
		}
		pops = append(pops, porcupine.Operation{ClientId: id, Input: o, Call: o.Call, Return: o.Ret})
	}
	return pops
}

// workerClient names a worker process's holder in a history.
func workerClient(pid int) string { return "w" + strconv.Itoa(pid) }

// write offers client's write with fence to the referee and records it.
func (h *history) write(rc *refClient, key, client string, fence int64) (bool, error) {
	call := now()
	ok, err := rc.write(key, fence)
	if err == nil {
		h.add(histOp{Op: 'W', Key: key, Client: client, Fence: fence, OK: ok, Call: call, Ret: now()})
	}
	return ok, err
}
