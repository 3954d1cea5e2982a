package faulttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// workerEnv selects worker mode: the test binary re-executes itself with
// -test.run=^TestWorkerProcess$ and this variable naming what to do.
const workerEnv = "FAULTTEST_WORKER"

// reportPrefix starts every line a worker reports on stdout; anything else
// there (the testing package's own output) is ignored.
const reportPrefix = "FTREPORT "

// TestWorkerProcess is the entry point of worker processes; run directly,
// it skips.
func TestWorkerProcess(t *testing.T) {
	mode := os.Getenv(workerEnv)
	var err error
	switch mode {
	case "":
		t.Skip("runs only as a worker process started by another test")
	case "mutex":
		err = mutexWorker()
	case "hold":
		err = holdWorker()
	case "once":
		err = onceWorker()
	case "fairwait":
		err = fairWaitWorker()
	case "multi":
		err = multiWorker()
	default:
		err = fmt.Errorf("unknown worker mode %q", mode)
	}
	if err != nil {
		report("error", map[string]string{"error": err.Error()})
		t.Fatal(err)
	}
}

// report writes one report line: the kind and a JSON body.
func report(kind string, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(`{}`)
	}
	fmt.Printf("%s%s %s\n", reportPrefix, kind, b)
}

// worker is a worker process seen from the parent.
type worker struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan workerLine
	stderr bytes.Buffer
	done   chan struct{}
	err    error // the process's exit, once done is closed

	mu sync.Mutex
}

// workerLine is one report.
type workerLine struct {
	kind string
	body json.RawMessage
}

// startWorker starts this test binary as a worker in mode with env added.
// t.Cleanup kills it (by its pid) if it is still running.
func startWorker(t testing.TB, mode string, env ...string) *worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(append(os.Environ(), workerEnv+"="+mode), env...)
	w := &worker{t: t, cmd: cmd, lines: make(chan workerLine, 64), done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &w.mu, w: &w.stderr}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("worker stdout: %v", err)
	}
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatalf("worker stdin: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), reportPrefix)
			if !ok {
				continue
			}
			kind, body, _ := strings.Cut(line, " ")
			w.lines <- workerLine{kind: kind, body: json.RawMessage(body)}
		}
		close(w.lines)
		w.err = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = w.stdin.Close()
		select {
		case <-w.done:
		default:
			_ = cmd.Process.Kill()
			for range w.lines {
			}
			<-w.done
		}
		if t.Failed() {
			t.Logf("worker %d stderr:\n%s", cmd.Process.Pid, w.stderrTail())
		}
	})
	return w
}

func (w *worker) pid() int { return w.cmd.Process.Pid }

func (w *worker) stderrTail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stderr.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

// send writes one command line to the worker's stdin.
func (w *worker) send(line string) error {
	_, err := fmt.Fprintln(w.stdin, line)
	return err
}

// expect waits for the next report, which must be of kind, and decodes its
// body into v. An "error" report or the end of the process fails t.
func (w *worker) expect(kind string, v any, timeout time.Duration) {
	w.t.Helper()
	select {
	case l, ok := <-w.lines:
		if !ok {
			<-w.done
			w.t.Fatalf("worker %d exited (%v) before reporting %s; stderr:\n%s", w.pid(), w.err, kind, w.stderrTail())
		}
		if l.kind != kind {
			w.t.Fatalf("worker %d reported %s %s, want %s", w.pid(), l.kind, l.body, kind)
		}
		if err := json.Unmarshal(l.body, v); err != nil {
			w.t.Fatalf("worker %d report %s %s: %v", w.pid(), l.kind, l.body, err)
		}
	case <-time.After(timeout):
		w.t.Fatalf("worker %d: no %s report within %v; stderr:\n%s", w.pid(), kind, timeout, w.stderrTail())
	}
}

// wait waits for the process to exit and returns its error.
func (w *worker) wait(timeout time.Duration) error {
	select {
	case <-w.done:
		return w.err
	case <-time.After(timeout):
		return fmt.Errorf("worker %d still running after %v", w.pid(), timeout)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// collect waits for each worker's report of kind (within timeout) and for
// its exit, and returns the reports in the workers' order.
func collect[T any](t *testing.T, ws []*worker, kind string, timeout time.Duration) []T {
	t.Helper()
	out := make([]T, len(ws))
	for i, w := range ws {
		w.expect(kind, &out[i], timeout)
		if err := w.wait(30 * time.Second); err != nil {
			t.Errorf("worker %d: %v", w.pid(), err)
		}
	}
	return out
}

// historyGoroutine runs body as goroutine g of a worker process, with a
// referee connection of its own and its name in the history, me; the
// operations body appends to ops go to the worker's history file when it
// returns. Failures go to fail.
func historyGoroutine(g int, fail func(error), body func(ref *refClient, me string, ops *[]histOp)) {
	ref, err := dialReferee(os.Getenv("FT_REFEREE"))
	if err != nil {
		fail(err)
		return
	}
	defer ref.close()
	var ops []histOp
	body(ref, workerClient(os.Getpid())+"g"+strconv.Itoa(g), &ops)
	if err := appendHistory(os.Getenv(histEnv), ops...); err != nil {
		fail(err)
	}
}
