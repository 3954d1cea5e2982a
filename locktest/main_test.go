package locktest_test

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentlock/lock/locktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// runTest runs body as a test would, with a TB whose cleanups run when
// body returns, for Examples, which get no *testing.T.
func runTest(body func(t locktest.TB)) {
	t := new(exampleT)
	defer t.cleanup()
	body(t)
}

// exampleT is a TB for Examples: Fatalf panics, Cleanup runs at the end.
type exampleT struct{ cleanups []func() }

func (*exampleT) Helper() {}

func (*exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (t *exampleT) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

func (t *exampleT) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
