package redistest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine or a child process outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(childCheck{m})
}

// childCheck runs the tests, then fails if any child process is left.
type childCheck struct{ m *testing.M }

func (c childCheck) Run() int {
	code := c.m.Run()
	if kids := children(); len(kids) > 0 {
		fmt.Fprintf(os.Stderr, "child processes left after the tests: %s\n", strings.Join(kids, ", "))
		return 1
	}
	return code
}

// children lists "pid name state" for each process whose parent is this one.
func children() []string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := strconv.Itoa(os.Getpid())
	var kids []string
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so cut at the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 2 && f[1] == me {
			kids = append(kids, strings.TrimSpace(s[:i+1])+" "+f[0])
		}
	}
	return kids
}
