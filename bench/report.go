package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// results is the machine-readable record of one run (results/latest.json).
type results struct {
	Date     string   `json:"date"`
	Command  string   `json:"command"`
	Quick    bool     `json:"quick"`
	Rounds   int      `json:"rounds"`
	Machine  machine  `json:"machine"`
	Tables   []*table `json:"tables"`
	Targets  []target `json:"targets"`
	Duration string   `json:"duration"`
}

// machine describes where the run happened.
type machine struct {
	CPUs  int    `json:"cpus"`
	CPU   string `json:"cpu"`
	Go    string `json:"go"`
	Redis string `json:"redis"`
	OS    string `json:"os"`
}

// column is one metric of a table.
type column struct {
	Key    string `json:"key"`
	Header string `json:"header"`
	Prec   int    `json:"prec"` // decimals printed
	Ratio  bool   `json:"ratio"`
}

// table is one scenario's results: a row per implementation.
type table struct {
	ID       string          `json:"id"`
	Title    string          `json:"title"`
	Baseline string          `json:"baseline"`
	Columns  []column        `json:"columns"`
	Order    []string        `json:"order"`
	Rows     map[string]*row `json:"rows"`
	Notes    []string        `json:"notes,omitempty"`
	Runs     [][]string      `json:"runs,omitempty"` // each round's order of implementations
}

// numRow is one row's figures by column key.
type numRow map[string]num

// row is one implementation: each round's metrics, their medians, and the
// median over rounds of the ratio to the baseline of the same round.
type row struct {
	Rounds []map[string]num `json:"rounds"`
	Median numRow           `json:"median"`
	Ratio  numRow           `json:"ratio,omitempty"`
}

func newTable(id, title, baseline string, cols ...column) *table {
	return &table{ID: id, Title: title, Baseline: baseline, Columns: cols, Rows: map[string]*row{}}
}

func (t *table) row(name string) *row {
	r := t.Rows[name]
	if r == nil {
		r = &row{}
		t.Rows[name] = r
		t.Order = append(t.Order, name)
	}
	return r
}

// summarize computes medians and, for ratio columns, the median of the
// per-round ratios to the baseline.
func (t *table) summarize() {
	base := t.Rows[t.Baseline]
	for _, r := range t.Rows {
		r.Median = numRow{}
		for _, c := range t.Columns {
			var xs []float64
			for _, m := range r.Rounds {
				if v, ok := m[c.Key]; ok {
					xs = append(xs, float64(v))
				}
			}
			r.Median[c.Key] = num(median(xs))
			if !c.Ratio || base == nil {
				continue
			}
			var rs []float64
			for i, m := range r.Rounds {
				if i < len(base.Rounds) {
					rs = append(rs, ratio(float64(m[c.Key]), float64(base.Rounds[i][c.Key])))
				}
			}
			if r.Ratio == nil {
				r.Ratio = numRow{}
			}
			r.Ratio[c.Key] = num(median(rs))
		}
	}
}

// floats returns m as float64s.
func (m numRow) floats() map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = float64(v)
	}
	return out
}

// med returns the median of key for impl, NaN if absent.
func (t *table) med(impl, key string) float64 {
	if r := t.Rows[impl]; r != nil {
		if v, ok := r.Median[key]; ok {
			return float64(v)
		}
	}
	return math.NaN()
}

// rat returns the median ratio of key for impl to the baseline.
func (t *table) rat(impl, key string) float64 {
	if r := t.Rows[impl]; r != nil {
		if v, ok := r.Ratio[key]; ok {
			return float64(v)
		}
	}
	return math.NaN()
}

// print writes the table in a compact, aligned form.
func (t *table) print(w io.Writer) {
	fmt.Fprintf(w, "\n%s — %s (baseline %s; medians of %d rounds, ×ratio = median of per-round ratios)\n",
		t.ID, t.Title, t.Baseline, roundsOf(t))
	head := []string{"impl"}
	for _, c := range t.Columns {
		head = append(head, c.Header)
	}
	lines := [][]string{head}
	for _, n := range t.Order {
		r := t.Rows[n]
		line := []string{n}
		for _, c := range t.Columns {
			s := fnum(float64(r.Median[c.Key]), c.Prec)
			if c.Ratio && n != t.Baseline && r.Ratio != nil {
				s += " ×" + fnum(float64(r.Ratio[c.Key]), 2)
			}
			line = append(line, s)
		}
		lines = append(lines, line)
	}
	widths := make([]int, len(head))
	for _, l := range lines {
		for i, s := range l {
			widths[i] = max(widths[i], len(s))
		}
	}
	for _, l := range lines {
		var b strings.Builder
		for i, s := range l {
			if i == 0 {
				fmt.Fprintf(&b, "  %-*s", widths[i], s)
			} else {
				fmt.Fprintf(&b, "  %*s", widths[i], s)
			}
		}
		fmt.Fprintln(w, b.String())
	}
	for _, n := range t.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

func roundsOf(t *table) int {
	n := 0
	for _, r := range t.Rows {
		n = max(n, len(r.Rounds))
	}
	return n
}

func fnum(f float64, prec int) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, f)
}

// target is one of the targets, checked against this run.
type target struct {
	ID     string `json:"id"`
	What   string `json:"what"`
	Value  num    `json:"value"`
	Limit  string `json:"limit"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail,omitempty"`
}

// check records a target: pass when value op limit holds ("<=" or ">=").
func (e *env) check(id, what string, value float64, op string, limit float64, detail string) {
	pass := false
	switch op {
	case "<=":
		pass = value <= limit
	case ">=":
		pass = value >= limit
	case "==":
		pass = value == limit
	}
	e.res.Targets = append(e.res.Targets, target{ID: id, What: what, Value: num(value),
		Limit: fmt.Sprintf("%s %.4g", op, limit), Pass: pass, Detail: detail})
}

func printTargets(w io.Writer, ts []target) {
	fmt.Fprintln(w, "\nTargets (agentlock at its defaults unless named)")
	for _, t := range ts {
		v := "PASS"
		if !t.Pass {
			v = "MISS"
		}
		fmt.Fprintf(w, "  %-4s %-4s %-58s %9s  (%s) %s\n", v, t.ID, t.What, fnum(float64(t.Value), 3), t.Limit, t.Detail)
	}
}

// write saves r as indented JSON at path, creating its directory.
func (r *results) write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
