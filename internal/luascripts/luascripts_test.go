package luascripts

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestFenceConstants: the Go constants that describe fence.lua say what the
// script does.
func TestFenceConstants(t *testing.T) {
	for _, c := range []struct {
		name string
		want int64
	}{
		{"FENCE_TTL", FenceTTL.Milliseconds()},
		{"CLOCKED", Clocked},
		{"START_AHEAD", FenceStartAhead.Microseconds()},
	} {
		m := regexp.MustCompile(`(?m)^local ` + c.name + ` = ([0-9e]+)`).FindStringSubmatch(fenceSrc)
		if m == nil {
			t.Fatalf("fence.lua defines no %s", c.name)
		}
		got, err := strconv.ParseFloat(m[1], 64)
		if err != nil || int64(got) != c.want {
			t.Fatalf("fence.lua: %s = %s, want %d", c.name, m[1], c.want)
		}
	}
	// acquire_fast.lua runs before fence.lua and keeps its own CLOCKED.
	m := regexp.MustCompile(`(?m)^local CLOCKED = ([0-9e]+)`).FindStringSubmatch(acquireFastSrc)
	if m == nil {
		t.Fatal("acquire_fast.lua defines no CLOCKED")
	}
	if got, err := strconv.ParseFloat(m[1], 64); err != nil || int64(got) != Clocked {
		t.Fatalf("acquire_fast.lua: CLOCKED = %s, want %d", m[1], Clocked)
	}
}

// TestAcquireReply: a reply >= 0 is a hold of ours and its fence; a
// negative one another holder's time left, -1 for none.
func TestAcquireReply(t *testing.T) {
	for _, c := range []struct {
		n     int64
		ours  bool
		fence int64
		left  time.Duration
	}{
		{0, true, 0, 0},
		{Clocked + 7, true, Clocked + 7, 0},
		{-1, false, 0, 0},
		{-1 - 1500, false, 0, 1500 * time.Millisecond},
	} {
		ours, fence, left := AcquireReply(c.n)
		if ours != c.ours || fence != c.fence || left != c.left {
			t.Fatalf("AcquireReply(%d) = %v, %d, %v; want %v, %d, %v", c.n, ours, fence, left, c.ours, c.fence, c.left)
		}
	}
}
