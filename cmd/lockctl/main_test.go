package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// bin is the lockctl binary TestMain builds.
var bin string

var update = flag.Bool("update", false, "rewrite the golden files")

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lockctl-test")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "lockctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(2)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		return goleakRun(m)
	}()
	os.Exit(code)
}

// goleakRun runs the tests, then looks for leaked goroutines.
func goleakRun(m *testing.M) int {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// ctl runs lockctl with args against addr (REDIS_ADDR) and returns what it did.
func ctl(t *testing.T, addr string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "REDIS_ADDR="+addr)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("lockctl %v: %v", args, err)
	}
	return r
}

// normaliser replaces what differs between runs (host, pid, times, TTLs,
// UUIDs) with placeholders and collapses the table padding.
func normaliser(t *testing.T) func(string) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	pid := fmt.Sprint(os.Getpid())
	uuid := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	when := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	ttl := regexp.MustCompile(`\b\d+(\.\d+)?(ms|s|m\d+(\.\d+)?s)\b`)
	fence := regexp.MustCompile(`\b\d{10,}\b`) // fences start at the server's clock in µs
	pad := regexp.MustCompile(` {2,}`)
	return func(s string) string {
		s = uuid.ReplaceAllString(s, "UUID")
		s = when.ReplaceAllString(s, "TIME")
		s = ttl.ReplaceAllString(s, "TTL")
		s = fence.ReplaceAllString(s, "FENCE")
		s = strings.ReplaceAll(s, " "+host+" ", " HOST ")
		s = strings.ReplaceAll(s, " "+pid+" ", " PID ")
		return pad.ReplaceAllString(s, " ")
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

// sortRows sorts the rows of the table whose header starts with header:
// the lines after it.
func sortRows(s, header string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, header) {
			sort.Strings(lines[i+1:])
			break
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
