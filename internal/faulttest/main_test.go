package faulttest

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		// A worker process: it reports over stdout and exits; the parent
		// checks the results.
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}
