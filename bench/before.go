package main

import (
	"fmt"
	"io"
	"slices"
)

// beforeImpl, when set, is agentlock built from an earlier commit: ab.sh
// generates the file that sets it, over a copy of that commit's tree under
// another module path. Every single-node scenario that runs "agentlock"
// then runs it too, as "al-before", in the same rounds and the same
// shuffled order, so that a change is measured against its base in one run
// and per-round ratios cancel the machine's swings (see printAB).
var beforeImpl *impl

// beforeName is the row of beforeImpl.
const beforeName = "al-before"

// withBefore returns impls with beforeImpl added when it is set and
// impls run agentlock on one node.
func withBefore(impls []impl, nodes int) []impl {
	if beforeImpl == nil || nodes != 1 || !slices.ContainsFunc(impls, func(im impl) bool { return im.name == "agentlock" }) {
		return impls
	}
	return append(slices.Clip(impls), *beforeImpl)
}

// printAB writes, for each table with both rows, the median over rounds of
// agentlock's figure over al-before's in the same round, for every ratio
// column, and in how many rounds agentlock's was the higher.
func printAB(w io.Writer, tables []*table) {
	for _, t := range tables {
		a, b := t.Rows["agentlock"], t.Rows[beforeName]
		if a == nil || b == nil {
			continue
		}
		fmt.Fprintf(w, "A/B %-5s agentlock ÷ %s, median of per-round ratios:", t.ID, beforeName)
		for _, c := range t.Columns {
			if !c.Ratio {
				continue
			}
			var rs []float64
			higher := 0
			for i := range min(len(a.Rounds), len(b.Rounds)) {
				r := ratio(float64(a.Rounds[i][c.Key]), float64(b.Rounds[i][c.Key]))
				rs = append(rs, r)
				if r > 1 {
					higher++
				}
			}
			fmt.Fprintf(w, "  %s %.3f (higher in %d of %d)", c.Key, median(rs), higher, len(rs))
		}
		fmt.Fprintln(w)
	}
}
