package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

const sample = `package p

type T[K comparable] struct{}

func short() {}

func (t *T[K]) long() {
	_ = 1
	_ = 2
	f := func() {
		_ = 3
	}
	f()
}

func (T[K]) value() int {
	return 0
}
`

func writeSample(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFuncs_countsFromFuncToClosingBrace(t *testing.T) {
	path := writeSample(t, t.TempDir(), "p.go")
	fns, err := Funcs(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"short": 1, "(*T).long": 8, "(T).value": 3}
	if len(fns) != len(want) {
		t.Fatalf("got %d functions %v, want %d", len(fns), fns, len(want))
	}
	for _, f := range fns {
		if want[f.Name] != f.Lines {
			t.Errorf("%s: %d lines, want %d", f.Name, f.Lines, want[f.Name])
		}
	}
}

func TestWalk_skipsTestsAndSkippedDirs(t *testing.T) {
	dir := t.TempDir()
	writeSample(t, dir, "p.go")
	writeSample(t, dir, "p_test.go")
	for _, sub := range []string{"bench", "testdata", ".hidden", "lib"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		writeSample(t, filepath.Join(dir, sub), "q.go")
	}
	over, err := walk(dir, regexp.MustCompile(`bench$`), 5)
	if err != nil {
		t.Fatal(err)
	}
	// (*T).long in p.go and in lib/q.go; not the test file, bench,
	// testdata or .hidden.
	if len(over) != 2 {
		t.Fatalf("over: %v, want (*T).long twice", over)
	}
	for _, f := range over {
		if f.Name != "(*T).long" {
			t.Errorf("over: %v", f)
		}
	}
}

func TestFuncs_badFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.go")
	if err := os.WriteFile(path, []byte("package p\nfunc {"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Funcs(path); err == nil {
		t.Fatal("a file that does not parse: no error")
	}
}
