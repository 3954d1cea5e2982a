package redistest

import (
	"flag"
	"strconv"
)

// DefaultParallel makes n the number of parallel tests that run at once,
// unless the command line gave -parallel. Call it from TestMain, before
// m.Run. Tests that each wait on their own redis-server processes and on
// timers, not on a CPU, keep a small machine busy only with more of them
// at once than GOMAXPROCS, the go tool's default.
func DefaultParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
