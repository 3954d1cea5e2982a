// Package stats holds the summary statistics the bench and its probes share.
package stats

import (
	"math"
	"slices"
)

// Median returns the median of xs (the mean of the two middle values when
// their count is even), ignoring NaNs; NaN when none is left.
func Median(xs []float64) float64 {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
