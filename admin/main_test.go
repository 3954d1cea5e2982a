package admin_test

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"go.uber.org/goleak"
)

// redisAddr is the in-process miniredis the Examples dial.
var redisAddr string

// exampleServer stops the example server before goleak looks for leaked
// goroutines.
type exampleServer struct {
	m interface{ Run() int }
	s *miniredis.Miniredis
}

func (e exampleServer) Run() int {
	defer e.s.Close()
	return e.m.Run()
}

func TestMain(m *testing.M) {
	s, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	redisAddr = s.Addr()
	goleak.VerifyTestMain(exampleServer{m: m, s: s})
}
