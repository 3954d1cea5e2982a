package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// writeMarkdown prints the results file at path as the Markdown tables
// docs/benchmarks.md quotes.
func writeMarkdown(w io.Writer, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	m := r.Machine
	fmt.Fprintf(w, "Run %s: `%s` (-rounds %d, took %s), %d CPUs (%s), %s, Redis %s, %s.\n",
		r.Date, strings.TrimSpace(r.Command), r.Rounds, r.Duration, m.CPUs, m.CPU, m.Go, m.Redis, m.OS)
	for _, t := range r.Tables {
		fmt.Fprintf(w, "\n#### %s — %s\n\n", t.ID, t.Title)
		if t.Baseline != "" {
			fmt.Fprintf(w, "Medians of %d interleaved rounds; baseline `%s`; (×r) is the median over rounds of the ratio to the baseline in the same round.\n\n", roundsOf(t), t.Baseline)
		}
		head := []string{"impl"}
		sep := []string{"---"}
		for _, c := range t.Columns {
			head = append(head, c.Header)
			sep = append(sep, "---:")
		}
		fmt.Fprintf(w, "| %s |\n| %s |\n", strings.Join(head, " | "), strings.Join(sep, " | "))
		for _, n := range t.Order {
			row := t.Rows[n]
			cells := []string{"`" + n + "`"}
			for _, c := range t.Columns {
				s := fnum(float64(row.Median[c.Key]), c.Prec)
				if c.Ratio && n != t.Baseline && row.Ratio != nil {
					s += " (×" + fnum(float64(row.Ratio[c.Key]), 2) + ")"
				}
				cells = append(cells, s)
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
		for _, note := range t.Notes {
			fmt.Fprintf(w, "\n- %s", note)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\n#### Targets\n\n| | scenario | target | measured | limit | detail |\n|---|---|---|---:|---|---|\n")
	for _, t := range r.Targets {
		v := "PASS"
		if !t.Pass {
			v = "**MISS**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", v, t.ID, t.What, fnum(float64(t.Value), 3), t.Limit, t.Detail)
	}
	return nil
}
