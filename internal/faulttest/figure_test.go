package faulttest

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// figuresEnv names a file that every FIGURE line is appended to as well, so
// that docs/design/fault-figures.md can be refreshed from one run:
//
//	FAULTTEST_FIGURES=/tmp/figures.txt go test -count=1 ./...
const figuresEnv = "FAULTTEST_FIGURES"

var figuresMu sync.Mutex

// figure logs one measured figure as a greppable line,
//
//	FIGURE scenario=<name> k1=v1 k2=v2 ...
//
// kv alternates keys and values.
func figure(t testing.TB, scenario string, kv ...any) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "FIGURE scenario=%s", scenario)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %v=%v", kv[i], kv[i+1])
	}
	line := b.String()
	t.Log(line)
	path := os.Getenv(figuresEnv)
	if path == "" {
		return
	}
	figuresMu.Lock()
	defer figuresMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("figures file: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}
