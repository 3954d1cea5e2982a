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
	// toxiproxy v2.5.0 can leave a NoopToxic's pipe blocked on its output
	// when a toxic is added while bytes are in flight on a link that is
	// then closed (ToxicLink.AddToxic restarts the stubs): a goroutine of
	// the proxy library, not of agentlock, which the proxy's own Stop does
	// not reach. Every goroutine of ours is still checked.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"))
}
