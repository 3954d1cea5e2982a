package kindtest

import (
	"sync"
	"testing"
	"time"
)

// RWOp is one critical section of a read-write lock's holder: its side,
// its hold's fence (0 when the caller cannot see it, as in WithWriteLock)
// and when it was entered and left, for a checker that wants the history.
type RWOp struct {
	Write        bool      // a writer's section
	Fence        int64     // the hold's fence
	Enter, Leave time.Time // when the section began and ended
}

// RWHistory records the critical sections of a read-write lock's holders
// and checks them as they happen: no reader beside a writer, one writer at
// a time, writer fences strictly increasing in the order writers entered,
// no reader fence below the last writer's. Safe for concurrent use.
type RWHistory struct {
	mu                  sync.Mutex
	readers, writers    int
	maxReaders, maxW    int
	beside, staleReads  int
	lastWriter          int64
	writerFences        []int64
	ops                 []RWOp
	readerFencesChecked int
}

// Enter records that a holder entered its section; it returns the index
// of the section for Leave.
func (h *RWHistory) Enter(write bool, fence int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if write {
		h.writers++
		h.maxW = max(h.maxW, h.writers)
		if fence != 0 {
			h.writerFences = append(h.writerFences, fence)
			h.lastWriter = fence
		}
	} else {
		h.readers++
		h.maxReaders = max(h.maxReaders, h.readers)
		if fence < h.lastWriter {
			h.staleReads++
		}
		h.readerFencesChecked++
	}
	if h.readers > 0 && h.writers > 0 {
		h.beside++
	}
	h.ops = append(h.ops, RWOp{Write: write, Fence: fence, Enter: time.Now()})
	return len(h.ops) - 1
}

// Leave records that the holder of section i left it.
func (h *RWHistory) Leave(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ops[i].Write {
		h.writers--
	} else {
		h.readers--
	}
	h.ops[i].Leave = time.Now()
}

// Ops returns the sections recorded so far, in the order they were entered.
func (h *RWHistory) Ops() []RWOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]RWOp(nil), h.ops...)
}

// MaxReaders returns the most readers that were inside at once.
func (h *RWHistory) MaxReaders() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.maxReaders
}

// Check fails the test on a reader beside a writer, two writers at once,
// writer fences not strictly increasing, or a reader whose fence was below
// the last writer's.
func (h *RWHistory) Check(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.beside != 0 || h.maxW > 1 {
		t.Fatalf("a reader beside a writer %d times; at most %d writers at once, want 1", h.beside, h.maxW)
	}
	for i := 1; i < len(h.writerFences); i++ {
		if h.writerFences[i] <= h.writerFences[i-1] {
			t.Fatalf("writer fence %d entered after %d", h.writerFences[i], h.writerFences[i-1])
		}
	}
	if h.staleReads != 0 {
		t.Fatalf("%d of %d readers carried a fence below the last writer's", h.staleReads, h.readerFencesChecked)
	}
}
