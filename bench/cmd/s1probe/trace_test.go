package main

import (
	"io"
	"os"
	"path/filepath"
	"runtime/trace"
	"strings"
	"testing"
)

func TestSummarise_countsWakeups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.trace")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := trace.Start(f); err != nil {
		t.Fatal(err)
	}
	ch := make(chan int)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range ch {
		}
	}()
	for i := range 100 {
		ch <- i
	}
	close(ch)
	<-done
	trace.Stop()
	_ = f.Close()

	out := captureStdout(t, func() {
		if err := summarise(path, 100); err != nil {
			t.Fatal(err)
		}
	})
	if !strings.Contains(out, "trace: goroutines created") || !strings.Contains(out, "woken") {
		t.Errorf("summary lacks its counts:\n%s", out)
	}
}

// captureStdout returns what fn prints.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	fn()
	os.Stdout = old
	_ = w.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}
