package lock_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"go.uber.org/goleak"
)

// redisAddr is the in-process miniredis the Examples dial.
var redisAddr string

// exampleServer wraps m so that its Run stops the example server and the
// shared cluster before goleak looks for leaked goroutines.
type exampleServer struct {
	m interface{ Run() int }
	s *miniredis.Miniredis
}

func (e exampleServer) Run() int {
	defer e.s.Close()
	defer stopSharedCluster()
	return e.m.Run()
}

// minParallel is how many parallel tests run at once unless -test.parallel
// says otherwise: they wait on servers, TTLs and hooks far more than they
// use a CPU, so GOMAXPROCS (the testing default) would leave the machine
// idle.
const minParallel = 8

func TestMain(m *testing.M) {
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", strconv.Itoa(max(runtime.GOMAXPROCS(0), minParallel)))
	}
	s, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	redisAddr = s.Addr()
	os.Setenv("REDIS_ADDR", "") // examples in this package never reach a real server by accident
	goleak.VerifyTestMain(exampleServer{m: m, s: s})
}
