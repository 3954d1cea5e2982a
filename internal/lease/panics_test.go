package lease

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestRecovered_logsThePanicAndMatchesErrPanicked: the error of work whose
// call panicked matches ErrPanicked and names the work and the panic; the
// panic is logged once at Error level with its stack, and a nil logger
// stays silent.
func TestRecovered_logsThePanicAndMatchesErrPanicked(t *testing.T) {
	var logs bytes.Buffer
	var err error
	func() {
		defer func() {
			err = Recovered(slog.New(slog.NewTextHandler(&logs, nil)), "renewal call", recover(), slog.String("key", "k"))
		}()
		panic("boom")
	}()
	if !errors.Is(err, ErrPanicked) || err.Error() != "lock: renewal call panicked: boom" {
		t.Fatalf("Recovered() = %q, want %q matching ErrPanicked", err, "lock: renewal call panicked: boom")
	}
	s := logs.String()
	if strings.Count(s, "level=ERROR") != 1 || !strings.Contains(s, "renewal call panicked") ||
		!strings.Contains(s, "key=k") || !strings.Contains(s, "panic=boom") || !strings.Contains(s, "panics_test.go") {
		t.Fatalf("log = %q, want one Error record with the key, the panic and a stack through the panicking function", s)
	}
	if err := Recovered(nil, "undo", "boom"); !errors.Is(err, ErrPanicked) {
		t.Fatalf("Recovered(nil logger) = %v, want an error matching ErrPanicked", err)
	}
}
