package faulttest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// referee runs in the test's own process and judges critical sections that
// run anywhere, in this process or in workers, over a loopback socket. Its
// state is guarded by one mutex, so it stays correct whatever the lock under
// test does. It is two things at once:
//
//   - an overlap detector: a section reports "enter" after its Acquire
//     returned and "exit" before its Release; more than one section of a key
//     inside at once is an overlap;
//   - a fenced store: "write" carries the writer's fence and is accepted only
//     when it is higher than the last fence the store accepted for the key.
//     A write is stale when a higher fence has already entered for the key;
//     a stale write that the store accepts is a safety violation fencing
//     failed to catch.
//
// The protocol is one line per request and per reply:
//
//	E key fence  ->  occupants after entering
//	W key fence  ->  1 accepted, 0 rejected
//	X key        ->  occupants after leaving
type referee struct {
	ln net.Listener
	wg sync.WaitGroup

	mu            sync.Mutex
	conns         map[net.Conn]struct{}
	occ           map[string]int
	maxIssued     map[string]int64
	lastAccepted  map[string]int64
	enters        int
	overlaps      int
	accepted      int
	rejected      int
	stalePresent  int
	staleAccepted int
}

// refereeStats is a snapshot of what the referee saw.
type refereeStats struct {
	Enters, Overlaps, Accepted, Rejected, StalePresented, StaleAccepted int
}

// startReferee listens on a loopback port until t ends.
func startReferee(t testing.TB) *referee {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("referee listen: %v", err)
	}
	r := &referee{
		ln:           ln,
		conns:        map[net.Conn]struct{}{},
		occ:          map[string]int{},
		maxIssued:    map[string]int64{},
		lastAccepted: map[string]int64{},
	}
	r.wg.Add(1)
	go r.serve()
	t.Cleanup(r.close)
	return r
}

func (r *referee) addr() string { return r.ln.Addr().String() }

func (r *referee) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *referee) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.conns[c] = struct{}{}
		r.mu.Unlock()
		r.wg.Add(1)
		go r.handle(c)
	}
}

func (r *referee) handle(c net.Conn) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
		_ = c.Close()
	}()
	in := bufio.NewScanner(c)
	out := bufio.NewWriter(c)
	for in.Scan() {
		f := strings.Fields(in.Text())
		reply := "ERR"
		if len(f) >= 2 {
			var fence int64
			if len(f) == 3 {
				fence, _ = strconv.ParseInt(f[2], 10, 64)
			}
			reply = strconv.Itoa(r.apply(f[0], f[1], fence))
		}
		fmt.Fprintln(out, reply)
		if out.Flush() != nil {
			return
		}
	}
}

func (r *referee) apply(op, key string, fence int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch op {
	case "E":
		r.enters++
		r.occ[key]++
		if r.occ[key] > 1 {
			r.overlaps++
		}
		r.maxIssued[key] = max(r.maxIssued[key], fence)
		return r.occ[key]
	case "W":
		stale := fence < r.maxIssued[key]
		ok := fence > r.lastAccepted[key]
		if stale {
			r.stalePresent++
		}
		if ok {
			r.accepted++
			r.lastAccepted[key] = fence
			if stale {
				r.staleAccepted++
			}
			return 1
		}
		r.rejected++
		return 0
	case "X":
		r.occ[key]--
		return r.occ[key]
	}
	return -1
}

func (r *referee) stats() refereeStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return refereeStats{
		Enters: r.enters, Overlaps: r.overlaps, Accepted: r.accepted, Rejected: r.rejected,
		StalePresented: r.stalePresent, StaleAccepted: r.staleAccepted,
	}
}

// refClient is one connection to a referee; not safe for concurrent use.
type refClient struct {
	c  net.Conn
	in *bufio.Reader
}

func dialReferee(addr string) (*refClient, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &refClient{c: c, in: bufio.NewReader(c)}, nil
}

func (rc *refClient) close() error { return rc.c.Close() }

func (rc *refClient) call(line string) (int, error) {
	if _, err := fmt.Fprintln(rc.c, line); err != nil {
		return 0, err
	}
	s, err := rc.in.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, errors.New("referee: bad reply " + strconv.Quote(s))
	}
	return n, nil
}

// enter reports a section of key starting with fence; it returns the
// occupants, 1 when alone.
func (rc *refClient) enter(key string, fence int64) (int, error) {
	return rc.call(fmt.Sprintf("E %s %d", key, fence))
}

// write offers a write with fence to the fenced store; true if accepted.
func (rc *refClient) write(key string, fence int64) (bool, error) {
	n, err := rc.call(fmt.Sprintf("W %s %d", key, fence))
	return n == 1, err
}

// exit reports the end of a section of key.
func (rc *refClient) exit(key string) error {
	_, err := rc.call("X " + key)
	return err
}
