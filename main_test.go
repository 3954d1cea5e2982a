package lock_test

import (
	"os"
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

func TestMain(m *testing.M) {
	s, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	redisAddr = s.Addr()
	os.Setenv("REDIS_ADDR", "") // examples in this package never reach a real server by accident
	goleak.VerifyTestMain(exampleServer{m: m, s: s})
}
