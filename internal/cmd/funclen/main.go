// Command funclen reports functions longer than a limit, counted from the
// func keyword to the closing brace. It walks the directories given, skips
// test files and the directories matched by -skip, prints each function
// over the limit as file:line name N lines, and exits 1 if there is one.
//
//	go run ./internal/cmd/funclen -max 80 -skip 'bench|faulttest' .
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

func main() {
	limit := flag.Int("max", 80, "the longest function allowed, in lines")
	skip := flag.String("skip", "", "a regexp of directory paths not to walk")
	flag.Parse()
	var re *regexp.Regexp
	if *skip != "" {
		var err error
		if re, err = regexp.Compile(*skip); err != nil {
			fmt.Fprintln(os.Stderr, "funclen: -skip:", err)
			os.Exit(2)
		}
	}
	over := 0
	for _, root := range flag.Args() {
		found, err := walk(root, re, *limit)
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
		for _, f := range found {
			fmt.Println(f)
		}
		over += len(found)
	}
	if over > 0 {
		fmt.Fprintf(os.Stderr, "funclen: %d functions over %d lines\n", over, *limit)
		os.Exit(1)
	}
}

// walk returns the functions over limit lines in the non-test Go files
// under root, skipping directories whose path re matches and those whose
// name starts with "." or "_" or is testdata, as the go tool does.
func walk(root string, re *regexp.Regexp, limit int) ([]Func, error) {
	var over []Func
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || (re != nil && re.MatchString(path))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fns, err := Funcs(path)
		if err != nil {
			return err
		}
		for _, f := range fns {
			if f.Lines > limit {
				over = append(over, f)
			}
		}
		return nil
	})
	return over, err
}
