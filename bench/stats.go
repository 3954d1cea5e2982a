package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/agentlock/lock/bench/internal/stats"
)

// percentile returns the p-th percentile (0..100) of ds by the nearest-rank
// method; ds is sorted in place. Zero for an empty slice.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	if !slices.IsSorted(ds) {
		slices.Sort(ds)
	}
	rank := int(math.Ceil(p / 100 * float64(len(ds))))
	rank = min(max(rank, 1), len(ds))
	return ds[rank-1]
}

// median returns the median of xs, ignoring NaNs; NaN when none is left.
func median(xs []float64) float64 { return stats.Median(xs) }

// us converts a duration to microseconds as a float.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ratio is a/b, NaN when b is zero or either is NaN.
func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// shuffled returns xs in an order drawn from a generator seeded with k:
// the same k gives the same order in every run.
func shuffled[T any](xs []T, k int) []T {
	out := slices.Clone(xs)
	rng := rand.New(rand.NewPCG(0x5eed, uint64(k)))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// rotate returns xs rotated left by k, so each round starts with another
// implementation.
func rotate[T any](xs []T, k int) []T {
	if len(xs) == 0 {
		return nil
	}
	k %= len(xs)
	out := make([]T, 0, len(xs))
	out = append(out, xs[k:]...)
	return append(out, xs[:k]...)
}
