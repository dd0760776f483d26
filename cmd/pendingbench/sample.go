package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// sample is a set of timings of one side of a comparison.
type sample []time.Duration

func (s sample) median() time.Duration { return medianOf(s) }

// quantile is the q-quantile (0 <= q < 1) of s (see quantileOf).
func (s sample) quantile(q float64) time.Duration { return quantileOf(s, q) }

// figure is what medians and quantiles are taken of: timings, and the
// MiB of the heap line.
type figure interface{ ~int64 | ~float64 }

// medianOf is the median of s (0 if s is empty); s is not changed.
func medianOf[T figure](s []T) T {
	if len(s) == 0 {
		return 0
	}
	c := slices.Sorted(slices.Values(s))
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// quantileOf is the q-quantile (0 <= q < 1) of s, the element at index
// len*q of s sorted (0 if s is empty); s is not changed.
func quantileOf[T figure](s []T, q float64) T {
	if len(s) == 0 {
		return 0
	}
	return slices.Sorted(slices.Values(s))[int(float64(len(s))*q)]
}

// spread is the range between the 10th and the 90th percentile.
func (s sample) spread() string {
	if len(s) == 0 {
		return ""
	}
	return fmt.Sprintf("p10-p90 %s-%s", fmtDur(s.quantile(0.1)), fmtDur(s.quantile(0.9)))
}

// timed runs f once and returns how long it took.
func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// interleave times a and b iters times each, alternating which side goes
// first, so that drift on the shared machine hits both sides alike. Each
// side gets its round number.
func interleave(iters int, a, b func(round int) error) (sa, sb sample, err error) {
	return interleaveWith(iters, nil, a, b)
}

// interleaveWith is interleave with between (if not nil) run, untimed,
// before every round: the place to drain mailboxes and the like.
func interleaveWith(iters int, between func(round int) error, a, b func(round int) error) (sa, sb sample, err error) {
	return alternate(iters, between, timedAt(a), timedAt(b))
}

// timedAt makes a side that times itself (for alternate and shuffled)
// out of f: all of f is timed.
func timedAt(f func(round int) error) func(int) (time.Duration, error) {
	return func(r int) (time.Duration, error) { return timed(func() error { return f(r) }) }
}

// alternate is the loop under interleaveWith for sides that time
// themselves (each returns how long its timed part took, so that it can
// do untimed work around it).
func alternate(iters int, between func(round int) error, a, b func(round int) (time.Duration, error)) (sa, sb sample, err error) {
	sa, sb = make(sample, 0, iters), make(sample, 0, iters)
	for r := range iters {
		if between != nil {
			if err := between(r); err != nil {
				return nil, nil, err
			}
		}
		first, second := a, b
		if r%2 == 1 {
			first, second = b, a
		}
		d1, err := first(r)
		if err != nil {
			return nil, nil, err
		}
		d2, err := second(r)
		if err != nil {
			return nil, nil, err
		}
		if r%2 == 1 {
			d1, d2 = d2, d1
		}
		sa, sb = append(sa, d1), append(sb, d2)
	}
	return sa, sb, nil
}

// shuffled is alternate for any number of sides: every round times each
// side once, in an order drawn anew from rng, so that drift on the shared
// machine and whatever one side leaves in the caches for the next hit
// every side alike (in a fixed cyclic order each side would always
// follow the same other side). between (if not nil) runs, untimed,
// before every round. It returns each side's timings.
func shuffled(iters int, rng *rand.Rand, between func(round int) error, sides ...func(round int) (time.Duration, error)) ([]sample, error) {
	out := make([]sample, len(sides))
	for i := range out {
		out[i] = make(sample, 0, iters)
	}
	for r := range iters {
		if between != nil {
			if err := between(r); err != nil {
				return nil, err
			}
		}
		for _, i := range rng.Perm(len(sides)) {
			d, err := sides[i](r)
			if err != nil {
				return nil, err
			}
			out[i] = append(out[i], d)
		}
	}
	return out, nil
}
